/*
 * fake_func.c - the fake runtime's answer to cudaFuncGetAttributes: which code
 * the device would run for a kernel. The emulator's kernels are host code, so
 * the architecture they were "built for" is a setting: FT_EMU_PTX_ARCH (the
 * PTX virtual architecture, major * 10 + minor, default 90: the Makefile's
 * sm_90 build), read at every call. A build for an older architecture run on
 * a newer device is what the driver JIT-compiles from that PTX: ptxVersion
 * the build's, binaryVersion the device's (FT_EMU_CC). Kernels from PTX older
 * than sm_90 have no griddepcontrol.wait in their prologue, so the emulator
 * (emu_sched.c) treats their FT_KERNEL_PROLOGUE as empty too: a PDL launch of
 * them then stops the process, as it could race on a GPU.
 */
#include "fake_cudart_internal.h"

#include <stdlib.h>
#include <string.h>

int ft_emu_ptx_arch(void) {
    const char *v = getenv("FT_EMU_PTX_ARCH");
    int a = v ? atoi(v) : 0;
    return a >= 10 && a < 1000 ? a : 90;
}

cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func) {
    ENTER();
    if (!attr || !func) return err(cudaErrorInvalidValue);
    int dev = fk_cc_major() * 10, ptx = ft_emu_ptx_arch();
    /* PTX newer than the device cannot be compiled for it */
    if (ptx > dev) return err(cudaErrorNoKernelImageForDevice);
    memset(attr, 0, sizeof *attr);
    attr->maxThreadsPerBlock = 1024;
    attr->maxDynamicSharedSizeBytes = 48 * 1024;
    attr->ptxVersion = ptx;
    attr->binaryVersion = dev; /* the Makefile's sm_NN code when it matches, else JIT from the PTX */
    return cudaSuccess;
}
