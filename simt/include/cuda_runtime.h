// Host stand-in for <cuda_runtime.h> in the emulated build: the SIMT emulator supplies its names.
#pragma once
#include "../simt.h"
