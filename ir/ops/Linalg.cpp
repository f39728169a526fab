//===- Linalg.cpp ---===//
#include "ir/ops/Internal.h"
