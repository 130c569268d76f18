// Host stand-in for <cuda_runtime_api.h> in the emulated build: the SIMT emulator supplies its names.
#pragma once
#include "../simt.h"
