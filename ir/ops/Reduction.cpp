//===- Reduction.cpp ---===//
#include "ir/ops/Internal.h"
