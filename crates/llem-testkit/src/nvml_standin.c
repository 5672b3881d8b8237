/*
 * A stand-in for NVIDIA's libnvidia-ml.so.1 on machines without a GPU: the one test double
 * the design allows. It exports the NVML entry points llem reaches through nvml-wrapper, with
 * NVML's C signatures and struct layouts, and answers from a script the test writes (path in
 * NVML_STANDIN_SCRIPT), read once at nvmlInit_v2. Times in the script are seconds since that
 * call, so a test can make a GPU's power step, throttle or fall off the bus mid-run.
 *
 * Script lines (one GPU per `gpu` line; `name` uses `_` for spaces):
 *   driver 550.54.15
 *   gpu uuid=GPU-aaaa name=NVIDIA_H100 power_w=300 power2_w=100 power2_at_s=1.0
 *       base_mj=5000000000 counter=1 instant=1 counter_period_ms=0 temp_c=55
 *       sm_clock_mhz=1980 mem_total_mib=81559 mem_used_mib=1024 util_gpu=90 util_mem=40
 *       throttle=0x20 throttle_from_s=0.5 throttle_until_s=1.0 mig=0 persistence=1
 *       lost_after_s=-1 power_limit_w=700 default_power_limit_w=700 max_sm_clock_mhz=1980
 *       ecc=1
 *       min_power_limit_w=200 max_power_limit_w=700 min_sm_clock_mhz=210
 *       mem_clock_mhz=2619 mem_clocks=2619,1593 idle_w=60 admin=1
 * (a power limit or maximum clock of 0, the default, answers NOT_SUPPORTED)
 * Without the variable or the file, nvmlInit_v2 answers NVML_ERROR_DRIVER_NOT_LOADED.
 *
 * Settings (power limit, locked graphics and memory clocks) live in a state file beside the
 * script (NVML_STANDIN_STATE, else the script's path + ".state"), as a driver keeps them for
 * every process: a setting made by one process is seen by the next, and outlives it. With
 * admin=0 every setter answers NO_PERMISSION, as for a user without root.
 *
 * Power model: power_w is what the GPU draws at its nominal clock (sm_clock_mhz); locked
 * clocks scale the part above idle_w by (clock / nominal)^2 (and a locked memory clock by
 * 0.8 + 0.2 x its ratio); a power limit below that caps the draw, lowers the reported clock and
 * sets the software power cap throttle reason (0x4); clocks locked below nominal set the
 * applications-clocks reason (0x2). The energy counter integrates the drawn power.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_UNKNOWN = 999,
};

enum { FI_DEV_POWER_AVERAGE = 185, FI_DEV_POWER_INSTANT = 186 };
enum { VALUE_TYPE_UNSIGNED_INT = 1 };

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;

typedef union {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    long long sllVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct {
    unsigned int fieldId, scopeId;
    long long timestamp, latencyUsec;
    int valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

struct gpu {
    char uuid[96], name[96];
    double power_w, power2_w, power2_at_s, counter_period_s, lost_after_s;
    double throttle_from_s, throttle_until_s;
    unsigned long long base_mj, throttle, mem_total_mib, mem_used_mib;
    unsigned temp_c, sm_clock_mhz, util_gpu, util_mem, max_sm_clock_mhz;
    int counter, instant, mig, persistence, ecc, admin;
    double power_limit_w, default_power_limit_w, min_power_limit_w, max_power_limit_w, idle_w;
    unsigned min_sm_clock_mhz, mem_clock_mhz, mem_clocks[8], n_mem_clocks;
    /* Settable state, as the state file holds it (0 = not locked). */
    double set_limit_w;
    unsigned gpc_min, gpc_max, mem_min, mem_max;
    /* This process's energy counter: drawn energy up to last_t, J. */
    double acc_j, last_t;
};

typedef struct gpu *nvmlDevice_t;

#define MAX_GPUS 16
static struct gpu gpus[MAX_GPUS];
static int n_gpus;
static char driver[80] = "550.54.15";
static double t0;
static int inited;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double since_init(void) { return now_s() - t0; }

static void set_field(struct gpu *g, const char *key, const char *val) {
    double d = strtod(val, NULL);
    if (!strcmp(key, "uuid")) {
        snprintf(g->uuid, sizeof g->uuid, "%s", val);
    } else if (!strcmp(key, "name")) {
        snprintf(g->name, sizeof g->name, "%s", val);
        for (char *c = g->name; *c; c++)
            if (*c == '_') *c = ' ';
    } else if (!strcmp(key, "power_w")) g->power_w = d;
    else if (!strcmp(key, "power2_w")) g->power2_w = d;
    else if (!strcmp(key, "power2_at_s")) g->power2_at_s = d;
    else if (!strcmp(key, "counter_period_ms")) g->counter_period_s = d / 1000.0;
    else if (!strcmp(key, "lost_after_s")) g->lost_after_s = d;
    else if (!strcmp(key, "throttle_from_s")) g->throttle_from_s = d;
    else if (!strcmp(key, "throttle_until_s")) g->throttle_until_s = d;
    else if (!strcmp(key, "base_mj")) g->base_mj = strtoull(val, NULL, 0);
    else if (!strcmp(key, "throttle")) g->throttle = strtoull(val, NULL, 0);
    else if (!strcmp(key, "mem_total_mib")) g->mem_total_mib = strtoull(val, NULL, 0);
    else if (!strcmp(key, "mem_used_mib")) g->mem_used_mib = strtoull(val, NULL, 0);
    else if (!strcmp(key, "temp_c")) g->temp_c = (unsigned)d;
    else if (!strcmp(key, "sm_clock_mhz")) g->sm_clock_mhz = (unsigned)d;
    else if (!strcmp(key, "util_gpu")) g->util_gpu = (unsigned)d;
    else if (!strcmp(key, "util_mem")) g->util_mem = (unsigned)d;
    else if (!strcmp(key, "counter")) g->counter = (int)d;
    else if (!strcmp(key, "instant")) g->instant = (int)d;
    else if (!strcmp(key, "mig")) g->mig = (int)d;
    else if (!strcmp(key, "persistence")) g->persistence = (int)d;
    else if (!strcmp(key, "ecc")) g->ecc = (int)d;
    else if (!strcmp(key, "power_limit_w")) g->power_limit_w = d;
    else if (!strcmp(key, "default_power_limit_w")) g->default_power_limit_w = d;
    else if (!strcmp(key, "max_sm_clock_mhz")) g->max_sm_clock_mhz = (unsigned)d;
    else if (!strcmp(key, "min_sm_clock_mhz")) g->min_sm_clock_mhz = (unsigned)d;
    else if (!strcmp(key, "min_power_limit_w")) g->min_power_limit_w = d;
    else if (!strcmp(key, "max_power_limit_w")) g->max_power_limit_w = d;
    else if (!strcmp(key, "idle_w")) g->idle_w = d;
    else if (!strcmp(key, "admin")) g->admin = (int)d;
    else if (!strcmp(key, "mem_clock_mhz")) g->mem_clock_mhz = (unsigned)d;
    else if (!strcmp(key, "mem_clocks")) {
        char buf[256], *save = NULL;
        snprintf(buf, sizeof buf, "%s", val);
        g->n_mem_clocks = 0;
        for (char *c = strtok_r(buf, ",", &save); c && g->n_mem_clocks < 8;
             c = strtok_r(NULL, ",", &save))
            g->mem_clocks[g->n_mem_clocks++] = (unsigned)strtoul(c, NULL, 10);
    }
}

/* The state file: one line per GPU, `<index> <limit_mw> <gpc_min> <gpc_max> <mem_min> <mem_max>`. */
static char state_path[1024];

static void load_state(void) {
    FILE *f = fopen(state_path, "r");
    if (!f) return;
    int i;
    unsigned long long mw;
    unsigned a, b, c, e;
    while (fscanf(f, "%d %llu %u %u %u %u", &i, &mw, &a, &b, &c, &e) == 6) {
        if (i < 0 || i >= n_gpus) continue;
        gpus[i].set_limit_w = (double)mw / 1000.0;
        gpus[i].gpc_min = a;
        gpus[i].gpc_max = b;
        gpus[i].mem_min = c;
        gpus[i].mem_max = e;
    }
    fclose(f);
}

static int save_state(void) {
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", state_path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return 0;
    for (int i = 0; i < n_gpus; i++)
        fprintf(f, "%d %llu %u %u %u %u\n", i, (unsigned long long)llround(gpus[i].set_limit_w * 1000.0),
                gpus[i].gpc_min, gpus[i].gpc_max, gpus[i].mem_min, gpus[i].mem_max);
    if (fclose(f) != 0) return 0;
    return rename(tmp, state_path) == 0;
}

static int load_script(void) {
    const char *path = getenv("NVML_STANDIN_SCRIPT");
    if (!path) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[2048];
    n_gpus = 0;
    while (fgets(line, sizeof line, f)) {
        char *save = NULL;
        char *word = strtok_r(line, " \t\r\n", &save);
        if (!word) continue;
        if (!strcmp(word, "driver")) {
            char *v = strtok_r(NULL, " \t\r\n", &save);
            if (v) snprintf(driver, sizeof driver, "%s", v);
        } else if (!strcmp(word, "gpu") && n_gpus < MAX_GPUS) {
            struct gpu *g = &gpus[n_gpus++];
            memset(g, 0, sizeof *g);
            g->power2_at_s = -1;
            g->lost_after_s = -1;
            g->counter = 1;
            g->instant = 1;
            g->persistence = 1;
            g->admin = 1;
            g->min_sm_clock_mhz = 210;
            snprintf(g->name, sizeof g->name, "NVIDIA Stand-in");
            snprintf(g->uuid, sizeof g->uuid, "GPU-standin-%d", n_gpus - 1);
            for (char *kv; (kv = strtok_r(NULL, " \t\r\n", &save));) {
                char *eq = strchr(kv, '=');
                if (!eq) continue;
                *eq = 0;
                set_field(g, kv, eq + 1);
            }
            g->set_limit_w = g->power_limit_w;
            if (!g->default_power_limit_w) g->default_power_limit_w = g->power_limit_w;
            if (!g->min_power_limit_w) g->min_power_limit_w = g->power_limit_w * 0.3;
            if (!g->max_power_limit_w) g->max_power_limit_w = g->power_limit_w;
            if (!g->mem_clock_mhz) g->mem_clock_mhz = 2619;
            if (!g->n_mem_clocks) g->mem_clocks[g->n_mem_clocks++] = g->mem_clock_mhz;
        }
    }
    fclose(f);
    const char *st = getenv("NVML_STANDIN_STATE");
    if (st) snprintf(state_path, sizeof state_path, "%s", st);
    else snprintf(state_path, sizeof state_path, "%s.state", path);
    /* The first process to start writes the driver's defaults; later ones read what is set. */
    if (access(state_path, F_OK) != 0) save_state();
    load_state();
    return 1;
}

/* What the GPU asks for at `t` s after init, at its nominal clock, W: a step from power_w
 * to power2_w at power2_at_s. */
static double demand_at(const struct gpu *g, double t) {
    return (g->power2_at_s >= 0 && t >= g->power2_at_s) ? g->power2_w : g->power_w;
}

/* The graphics clock the locks allow at load, MHz. */
static double locked_clock(const struct gpu *g) {
    double f = g->sm_clock_mhz;
    if (g->gpc_max && f > g->gpc_max) f = g->gpc_max;
    if (g->gpc_min && f < g->gpc_min) f = g->gpc_min;
    return f;
}

/* Power before the limit, W: the part above idle scaled by the locked clocks. */
static double unlimited_w(const struct gpu *g, double demand) {
    double dynamic = demand > g->idle_w ? demand - g->idle_w : 0;
    if (g->sm_clock_mhz) {
        double r = locked_clock(g) / g->sm_clock_mhz;
        dynamic *= r * r;
    }
    if (g->mem_max && g->mem_clock_mhz) dynamic *= 0.8 + 0.2 * g->mem_max / (double)g->mem_clock_mhz;
    return (demand < g->idle_w ? demand : g->idle_w) + dynamic;
}

/* Power drawn for `demand`, W: capped by the power limit. */
static double drawn_w(const struct gpu *g, double demand) {
    double p = unlimited_w(g, demand);
    return (g->set_limit_w > 0 && p > g->set_limit_w) ? g->set_limit_w : p;
}

static double power_at(const struct gpu *g, double t) { return drawn_w(g, demand_at(g, t)); }

/* Drawn energy over [a, b], J, under the current settings. */
static double drawn_between(const struct gpu *g, double a, double b) {
    if (b <= a) return 0;
    double s = g->power2_at_s;
    if (s < 0 || b <= s || a >= s) return drawn_w(g, demand_at(g, a)) * (b - a);
    return drawn_w(g, g->power_w) * (s - a) + drawn_w(g, g->power2_w) * (b - s);
}

/* Energy since init at `t`, J: what was drawn, accumulated as the process reads it. */
static double energy_at(struct gpu *g, double t) {
    if (t <= 0) return 0;
    if (t > g->last_t) {
        g->acc_j += drawn_between(g, g->last_t, t);
        g->last_t = t;
    }
    return g->acc_j;
}

static int lost(const struct gpu *g) {
    return g->lost_after_s >= 0 && since_init() >= g->lost_after_s;
}

static int valid(nvmlDevice_t d) {
    return inited && d >= gpus && d < gpus + n_gpus;
}

#define DEVICE_GUARD(d)                                      \
    do {                                                     \
        if (!inited) return NVML_ERROR_UNINITIALIZED;        \
        if (!valid(d)) return NVML_ERROR_INVALID_ARGUMENT;   \
        if (lost(d)) return NVML_ERROR_GPU_IS_LOST;          \
        load_state();                                        \
    } while (0)

static nvmlReturn_t copy_string(char *out, unsigned int length, const char *s) {
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) {
    if (!load_script()) return NVML_ERROR_DRIVER_NOT_LOADED;
    t0 = now_s();
    inited = 1;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    return nvmlInit_v2();
}

nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }

const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    if (!inited) return NVML_ERROR_UNINITIALIZED;
    return copy_string(version, length, driver);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!inited) return NVML_ERROR_UNINITIALIZED;
    *count = (unsigned)n_gpus;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!inited) return NVML_ERROR_UNINITIALIZED;
    if (index >= (unsigned)n_gpus) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &gpus[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    if (!inited) return NVML_ERROR_UNINITIALIZED;
    if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < n_gpus; i++)
        if (!strcmp(gpus[i].uuid, uuid)) {
            *device = &gpus[i];
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int length) {
    DEVICE_GUARD(d);
    return copy_string(uuid, length, d->uuid);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length) {
    DEVICE_GUARD(d);
    return copy_string(name, length, d->name);
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *current, unsigned int *pending) {
    DEVICE_GUARD(d);
    *current = (unsigned)d->mig;
    *pending = (unsigned)d->mig;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t d, int *current, int *pending) {
    DEVICE_GUARD(d);
    *current = d->ecc;
    *pending = d->ecc;
    return NVML_SUCCESS;
}

static nvmlReturn_t milliwatts(double w, unsigned int *mw) {
    if (w <= 0) return NVML_ERROR_NOT_SUPPORTED;
    *mw = (unsigned)llround(w * 1000.0);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *mw) {
    DEVICE_GUARD(d);
    if (d->power_limit_w <= 0) return NVML_ERROR_NOT_SUPPORTED;
    return milliwatts(d->set_limit_w, mw);
}

nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t d, unsigned int *mw) {
    DEVICE_GUARD(d);
    if (d->power_limit_w <= 0) return NVML_ERROR_NOT_SUPPORTED;
    return milliwatts(d->set_limit_w, mw);
}

nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t d, unsigned int *min_mw,
                                                          unsigned int *max_mw) {
    DEVICE_GUARD(d);
    if (d->power_limit_w <= 0) return NVML_ERROR_NOT_SUPPORTED;
    *min_mw = (unsigned)llround(d->min_power_limit_w * 1000.0);
    *max_mw = (unsigned)llround(d->max_power_limit_w * 1000.0);
    return NVML_SUCCESS;
}

/* Settles this process's counter under the old settings before they change. */
static void settle(struct gpu *g) { energy_at(g, since_init()); }

nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t d, unsigned int mw) {
    DEVICE_GUARD(d);
    if (d->power_limit_w <= 0) return NVML_ERROR_NOT_SUPPORTED;
    if (!d->admin) return NVML_ERROR_NO_PERMISSION;
    double w = mw / 1000.0;
    if (w < d->min_power_limit_w - 1e-9 || w > d->max_power_limit_w + 1e-9)
        return NVML_ERROR_INVALID_ARGUMENT;
    settle(d);
    d->set_limit_w = w;
    return save_state() ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t d, unsigned int lo, unsigned int hi) {
    DEVICE_GUARD(d);
    if (!d->max_sm_clock_mhz) return NVML_ERROR_NOT_SUPPORTED;
    if (!d->admin) return NVML_ERROR_NO_PERMISSION;
    if (lo > hi || lo < d->min_sm_clock_mhz || hi > d->max_sm_clock_mhz)
        return NVML_ERROR_INVALID_ARGUMENT;
    settle(d);
    d->gpc_min = lo;
    d->gpc_max = hi;
    return save_state() ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t d) {
    DEVICE_GUARD(d);
    if (!d->max_sm_clock_mhz) return NVML_ERROR_NOT_SUPPORTED;
    if (!d->admin) return NVML_ERROR_NO_PERMISSION;
    settle(d);
    d->gpc_min = d->gpc_max = 0;
    return save_state() ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

static int supported_mem(const struct gpu *g, unsigned mhz) {
    for (unsigned i = 0; i < g->n_mem_clocks; i++)
        if (g->mem_clocks[i] == mhz) return 1;
    return 0;
}

nvmlReturn_t nvmlDeviceSetMemoryLockedClocks(nvmlDevice_t d, unsigned int lo, unsigned int hi) {
    DEVICE_GUARD(d);
    if (!d->admin) return NVML_ERROR_NO_PERMISSION;
    if (lo > hi || !supported_mem(d, lo) || !supported_mem(d, hi)) return NVML_ERROR_INVALID_ARGUMENT;
    settle(d);
    d->mem_min = lo;
    d->mem_max = hi;
    return save_state() ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

nvmlReturn_t nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t d) {
    DEVICE_GUARD(d);
    if (!d->admin) return NVML_ERROR_NO_PERMISSION;
    settle(d);
    d->mem_min = d->mem_max = 0;
    return save_state() ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

/* Fills `out` (room for *count) from `v`; INSUFFICIENT_SIZE with the size needed. */
static nvmlReturn_t fill(const unsigned *v, unsigned n, unsigned int *count, unsigned int *out) {
    unsigned room = *count;
    *count = n;
    if (room < n || !out) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, v, n * sizeof *v);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t d, unsigned int *count,
                                                unsigned int *clocks) {
    DEVICE_GUARD(d);
    return fill(d->mem_clocks, d->n_mem_clocks, count, clocks);
}

/* Graphics clocks in 15 MHz steps from the highest down, as the driver lists them. */
nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t d, unsigned int mem,
                                                  unsigned int *count, unsigned int *clocks) {
    DEVICE_GUARD(d);
    if (!d->max_sm_clock_mhz) return NVML_ERROR_NOT_SUPPORTED;
    if (!supported_mem(d, mem)) return NVML_ERROR_NOT_FOUND;
    static unsigned v[1024];
    unsigned n = 0;
    for (unsigned f = d->max_sm_clock_mhz; f >= d->min_sm_clock_mhz && n < 1024; f -= 15) {
        v[n++] = f;
        if (f < 15) break;
    }
    if (n && v[n - 1] != d->min_sm_clock_mhz && n < 1024) v[n++] = d->min_sm_clock_mhz;
    return fill(v, n, count, clocks);
}

nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t d, unsigned int *mw) {
    DEVICE_GUARD(d);
    return milliwatts(d->default_power_limit_w, mw);
}

enum { CLOCK_GRAPHICS = 0, CLOCK_SM = 1, CLOCK_MEM = 2 };

nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t d, int type, unsigned int *mhz) {
    DEVICE_GUARD(d);
    if (type == CLOCK_MEM) {
        unsigned top = 0;
        for (unsigned i = 0; i < d->n_mem_clocks; i++)
            if (d->mem_clocks[i] > top) top = d->mem_clocks[i];
        *mhz = top;
        return NVML_SUCCESS;
    }
    if (!d->max_sm_clock_mhz) return NVML_ERROR_NOT_SUPPORTED;
    *mhz = d->max_sm_clock_mhz;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, int *mode) {
    DEVICE_GUARD(d);
    *mode = d->persistence;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *mj) {
    DEVICE_GUARD(d);
    if (!d->counter) return NVML_ERROR_NOT_SUPPORTED;
    double t = since_init();
    /* The driver refreshes the counter on its own period, not on every read. */
    if (d->counter_period_s > 0) t = floor(t / d->counter_period_s) * d->counter_period_s;
    *mj = d->base_mj + (unsigned long long)llround(energy_at(d, t) * 1000.0);
    return NVML_SUCCESS;
}

/* NVML's averaged power: the mean over the last second. */
static unsigned int average_mw(const struct gpu *g) {
    double t = since_init(), from = t > 1.0 ? t - 1.0 : 0.0;
    double w = t > from ? drawn_between(g, from, t) / (t - from) : power_at(g, t);
    return (unsigned)llround(w * 1000.0);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw) {
    DEVICE_GUARD(d);
    *mw = average_mw(d);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int count, nvmlFieldValue_t *values) {
    DEVICE_GUARD(d);
    if (count < 0 || (count > 0 && !values)) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < count; i++) {
        nvmlFieldValue_t *v = &values[i];
        v->timestamp = (long long)(now_s() * 1e6);
        v->latencyUsec = 0;
        v->valueType = VALUE_TYPE_UNSIGNED_INT;
        if (v->fieldId == FI_DEV_POWER_INSTANT && d->instant) {
            v->value.uiVal = (unsigned)llround(power_at(d, since_init()) * 1000.0);
            v->nvmlReturn = NVML_SUCCESS;
        } else if (v->fieldId == FI_DEV_POWER_AVERAGE) {
            v->value.uiVal = average_mw(d);
            v->nvmlReturn = NVML_SUCCESS;
        } else {
            v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        }
    }
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *temp) {
    DEVICE_GUARD(d);
    (void)sensor;
    *temp = d->temp_c;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
    DEVICE_GUARD(d);
    m->total = d->mem_total_mib << 20;
    m->used = d->mem_used_mib << 20;
    m->reserved = 0;
    m->free = m->total > m->used ? m->total - m->used : 0;
    return NVML_SUCCESS;
}

/* The graphics clock now, MHz: the locked clock, lowered further while the power limit caps
 * the draw (dynamic power goes with the square of the clock in this model). */
static double clock_now(const struct gpu *g) {
    double f = locked_clock(g), demand = demand_at(g, since_init());
    double want = unlimited_w(g, demand), got = drawn_w(g, demand);
    if (got < want && want > g->idle_w) f *= sqrt((got - g->idle_w) / (want - g->idle_w));
    return f;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *mhz) {
    DEVICE_GUARD(d);
    if (type == CLOCK_MEM) *mhz = d->mem_max ? d->mem_max : d->mem_clock_mhz;
    else *mhz = (unsigned)llround(clock_now(d));
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
    DEVICE_GUARD(d);
    u->gpu = d->util_gpu;
    u->memory = d->util_mem;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long *r) {
    DEVICE_GUARD(d);
    double t = since_init();
    *r = (t >= d->throttle_from_s && t < d->throttle_until_s) ? d->throttle : 0;
    double demand = demand_at(d, t);
    if (drawn_w(d, demand) < unlimited_w(d, demand)) *r |= 0x4; /* software power cap */
    if (locked_clock(d) < d->sm_clock_mhz) *r |= 0x2;          /* clocks setting */
    return NVML_SUCCESS;
}
