//===- Elementwise.cpp ---===//
#include "ir/ops/Internal.h"
