#include "passes/PassManager.h"
