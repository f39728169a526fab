//===- DataMovement.cpp ---===//
#include "ir/ops/Internal.h"
