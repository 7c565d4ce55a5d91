/*
 * nvtx_inject.c - a minimal NVTX tool, built as build/tests/libnvtx_inject.so,
 * so the tests see exactly what Nsight Systems would be handed: loaded by the
 * application's NVTX v3 headers from NVTX_INJECTION64_PATH, it takes the entry
 * points through the export table (InitializeInjectionNvtx2 -> NVTX_ETID_CALLBACKS
 * -> GetModuleFunctionTable for the CORE, CORE2 and CUDART modules) and writes
 * one line per call to the file named by FT_NVTX_INJECT_OUT (tab-separated):
 *
 *   domain  D  NAME                      nvtxDomainCreateA (D = 1, 2, ...)
 *   string  D  S  TEXT                   nvtxDomainRegisterStringA
 *   category D  ID  NAME                 nvtx[Domain]NameCategoryA (D 0: global)
 *   push    D  TID  CATEGORY  COLOR  PAYLOAD  HOW  NAME    nvtx[Domain]RangePush*
 *   pop     D  TID                       nvtx[Domain]RangePop (D 0: default domain)
 *   thread  TID  NAME                    nvtxNameOsThreadA
 *   stream  PTR  NAME                    nvtxNameCudaStreamA
 *   other   FUNCTION                     marks, start/end ranges
 *
 * PAYLOAD is "-" when none; HOW is R for a registered string (NAME is its text),
 * A for an ASCII message, ? otherwise.
 * Without FT_NVTX_INJECT_OUT it is a no-op tool (every entry point returns at
 * once): the "tool attached, tool costs nothing" case of the overhead study.
 */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_STRINGS 65536
#define MAX_DOMAINS 64

static FILE *out;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char *strings[MAX_STRINGS + 1]; /* [handle] text, handles from 1 */
static int n_strings;
static int n_domains;

static long tid(void) { return (long)syscall(SYS_gettid); }

static void emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void emit(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&mu);
    vfprintf(out, fmt, ap);
    fflush(out);
    pthread_mutex_unlock(&mu);
    va_end(ap);
}

static uintptr_t domain_id(nvtxDomainHandle_t d) { return (uintptr_t)d; }

/* The event's name as a tool resolves it. */
static void message_text(const nvtxEventAttributes_t *a, char *buf, size_t n) {
    if (!a) {
        snprintf(buf, n, "<no attributes>");
        return;
    }
    switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: snprintf(buf, n, "%s", a->message.ascii ? a->message.ascii : "<null>"); break;
    case NVTX_MESSAGE_TYPE_REGISTERED: {
        uintptr_t h = (uintptr_t)a->message.registered;
        pthread_mutex_lock(&mu);
        snprintf(buf, n, "%s", h >= 1 && h <= (uintptr_t)n_strings ? strings[h] : "<bad handle>");
        pthread_mutex_unlock(&mu);
        break;
    }
    case NVTX_MESSAGE_UNKNOWN: snprintf(buf, n, "<no message>"); break;
    default: snprintf(buf, n, "<message type %d>", (int)a->messageType); break;
    }
}

static void push_line(uintptr_t dom, const nvtxEventAttributes_t *a) {
    char name[512], payload[32] = "-";
    message_text(a, name, sizeof name);
    if (a && a->payloadType == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64)
        snprintf(payload, sizeof payload, "%llu", (unsigned long long)a->payload.ullValue);
    else if (a && a->payloadType != NVTX_PAYLOAD_UNKNOWN)
        snprintf(payload, sizeof payload, "type%d", (int)a->payloadType);
    const char *how = !a ? "?" : a->messageType == NVTX_MESSAGE_TYPE_REGISTERED ? "R"
                    : a->messageType == NVTX_MESSAGE_TYPE_ASCII ? "A" : "?";
    emit("push\t%lu\t%ld\t%u\t%08x\t%s\t%s\t%s\n", (unsigned long)dom, tid(), a ? a->category : 0,
         a && a->colorType == NVTX_COLOR_ARGB ? a->color : 0, payload, how, name);
}

/* ---- CORE ---- */

static int NVTX_API push_a(const char *m) {
    if (out) emit("push\t0\t%ld\t0\t00000000\t-\tA\t%s\n", tid(), m ? m : "<null>");
    return 0;
}
static int NVTX_API push_ex(const nvtxEventAttributes_t *a) {
    if (out) push_line(0, a);
    return 0;
}
static int NVTX_API pop0(void) {
    if (out) emit("pop\t0\t%ld\n", tid());
    return 0;
}
static void NVTX_API mark_a(const char *m) {
    (void)m;
    if (out) emit("other\tnvtxMarkA\n");
}
static void NVTX_API mark_ex(const nvtxEventAttributes_t *a) {
    (void)a;
    if (out) emit("other\tnvtxMarkEx\n");
}
static nvtxRangeId_t NVTX_API start_a(const char *m) {
    (void)m;
    if (out) emit("other\tnvtxRangeStartA\n");
    return 1;
}
static nvtxRangeId_t NVTX_API start_ex(const nvtxEventAttributes_t *a) {
    (void)a;
    if (out) emit("other\tnvtxRangeStartEx\n");
    return 1;
}
static void NVTX_API range_end(nvtxRangeId_t id) {
    (void)id;
    if (out) emit("other\tnvtxRangeEnd\n");
}
static void NVTX_API name_category(uint32_t id, const char *name) {
    if (out) emit("category\t0\t%u\t%s\n", id, name ? name : "<null>");
}
static void NVTX_API name_thread(uint32_t t, const char *name) {
    if (out) emit("thread\t%u\t%s\n", t, name ? name : "<null>");
}

/* ---- CORE2 (domains) ---- */

static nvtxDomainHandle_t NVTX_API domain_create(const char *name) {
    pthread_mutex_lock(&mu);
    uintptr_t d = n_domains < MAX_DOMAINS ? (uintptr_t)++n_domains : 0;
    pthread_mutex_unlock(&mu);
    if (out) emit("domain\t%lu\t%s\n", (unsigned long)d, name ? name : "<null>");
    return (nvtxDomainHandle_t)d;
}
static void NVTX_API domain_destroy(nvtxDomainHandle_t d) {
    if (out) emit("other\tnvtxDomainDestroy %lu\n", (unsigned long)domain_id(d));
}
static nvtxStringHandle_t NVTX_API register_string(nvtxDomainHandle_t d, const char *s) {
    pthread_mutex_lock(&mu);
    uintptr_t h = 0;
    if (n_strings < MAX_STRINGS && s && (strings[n_strings + 1] = strdup(s))) h = (uintptr_t)++n_strings;
    pthread_mutex_unlock(&mu);
    if (out && h) emit("string\t%lu\t%lu\t%s\n", (unsigned long)domain_id(d), (unsigned long)h, s);
    return (nvtxStringHandle_t)h;
}
static void NVTX_API domain_category(nvtxDomainHandle_t d, uint32_t id, const char *name) {
    if (out) emit("category\t%lu\t%u\t%s\n", (unsigned long)domain_id(d), id, name ? name : "<null>");
}
static int NVTX_API domain_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    if (out) push_line(domain_id(d), a);
    return 0;
}
static int NVTX_API domain_pop(nvtxDomainHandle_t d) {
    if (out) emit("pop\t%lu\t%ld\n", (unsigned long)domain_id(d), tid());
    return 0;
}
static void NVTX_API domain_mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    (void)d;
    (void)a;
    if (out) emit("other\tnvtxDomainMarkEx\n");
}
static nvtxRangeId_t NVTX_API domain_start(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    (void)d;
    (void)a;
    if (out) emit("other\tnvtxDomainRangeStartEx\n");
    return 1;
}
static void NVTX_API domain_end(nvtxDomainHandle_t d, nvtxRangeId_t id) {
    (void)d;
    (void)id;
    if (out) emit("other\tnvtxDomainRangeEnd\n");
}
static void NVTX_API initialize(const void *r) { (void)r; }

/* ---- CUDART ---- */

static void NVTX_API name_stream(void *stream, const char *name) {
    if (out) emit("stream\t%p\t%s\n", stream, name ? name : "<null>");
}

static int install(NvtxGetExportTableFunc_t get, NvtxCallbackModule mod, const int *ids,
                   NvtxFunctionPointer const *fns, int n) {
    const NvtxExportTableCallbacks *cb = (const NvtxExportTableCallbacks *)get(NVTX_ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof *cb) return 0;
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    if (!cb->GetModuleFunctionTable(mod, &table, &size) || !table) return 0;
    for (int i = 0; i < n; i++)
        if ((unsigned)ids[i] <= size && table[ids[i]]) *table[ids[i]] = fns[i];
    return 1;
}

#define FN(f) ((NvtxFunctionPointer)(f))

__attribute__((visibility("default"))) int NVTX_API InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
    const char *path = getenv("FT_NVTX_INJECT_OUT");
    if (path && *path && !(out = fopen(path, "a"))) return 0;
    static const int core_ids[] = {NVTX_CBID_CORE_MarkEx,       NVTX_CBID_CORE_MarkA,
                                   NVTX_CBID_CORE_RangeStartEx, NVTX_CBID_CORE_RangeStartA,
                                   NVTX_CBID_CORE_RangeEnd,     NVTX_CBID_CORE_RangePushEx,
                                   NVTX_CBID_CORE_RangePushA,   NVTX_CBID_CORE_RangePop,
                                   NVTX_CBID_CORE_NameCategoryA, NVTX_CBID_CORE_NameOsThreadA};
    const NvtxFunctionPointer core_fns[] = {FN(mark_ex), FN(mark_a),  FN(start_ex), FN(start_a),
                                            FN(range_end), FN(push_ex), FN(push_a), FN(pop0),
                                            FN(name_category), FN(name_thread)};
    static const int core2_ids[] = {
        NVTX_CBID_CORE2_DomainMarkEx,         NVTX_CBID_CORE2_DomainRangeStartEx,
        NVTX_CBID_CORE2_DomainRangeEnd,       NVTX_CBID_CORE2_DomainRangePushEx,
        NVTX_CBID_CORE2_DomainRangePop,       NVTX_CBID_CORE2_DomainNameCategoryA,
        NVTX_CBID_CORE2_DomainRegisterStringA, NVTX_CBID_CORE2_DomainCreateA,
        NVTX_CBID_CORE2_DomainDestroy,        NVTX_CBID_CORE2_Initialize};
    const NvtxFunctionPointer core2_fns[] = {
        FN(domain_mark),     FN(domain_start),    FN(domain_end),    FN(domain_push),
        FN(domain_pop),      FN(domain_category), FN(register_string), FN(domain_create),
        FN(domain_destroy),  FN(initialize)};
    static const int rt_ids[] = {NVTX_CBID_CUDART_NameCudaStreamA};
    const NvtxFunctionPointer rt_fns[] = {FN(name_stream)};
    int ok = install(get, NVTX_CB_MODULE_CORE, core_ids, core_fns, 10) &&
             install(get, NVTX_CB_MODULE_CORE2, core2_ids, core2_fns, 10);
    install(get, NVTX_CB_MODULE_CUDART, rt_ids, rt_fns, 1); /* optional */
    return ok;
}
