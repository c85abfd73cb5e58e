// Kernel times (CTRON_KERNEL_TIMES): where a GPU step's device time goes, by launcher, on any machine
// where CUDA events work. Nsight Compute needs the hardware counters, which some GPU runtimes refuse
// (the device README's gVisor machines); events need nothing.
//
// How. The compute stream runs its work in order, so after every launch (CUDA_LAUNCHED, and each
// cuBLASLt matmul, and each copy or memset on the stream: CUDA_QUEUED, a row per kind and file) one
// event is recorded, and the device time between two consecutive events is the later one's: its work,
// plus any time the device sat idle waiting for the host to queue it. Idle time after a host wait (a read-back, the step's end)
// has its own row: an event is recorded when the host returns from the wait, and the interval that
// ends there is "(device idle: host waits)". The stream is empty then, so the next launch starts when
// the host queues it: of its interval, the host's time since the wait (its work between steps: data,
// logging) is "(device idle: host work after a wait)", the rest the launch's. The host's own time
// between two launches is kept beside it: a launcher whose host µs/launch exceeds its device time
// starves the device (launch-bound). Summed over the rows, the host's times are the step's wall time.
//
// Steps. The trainer resets its phase marks once a step (marks_reset): those are the boundaries. The
// time before the first is setup, the first step is warm-up (cuBLASLt plans, scratch growth), and what
// follows the last boundary (the last step, evaluation, saving) is not a whole step, so a run of N
// steps reports steps 2 .. N−1, averaged. With fewer than three boundaries it reports every launch.
//
// One profiled stream per process: the first CUDA backend opened with the variable set. The trainer
// launches from one thread; a lock keeps the records whole should another thread wait on the stream.
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "backend/cuda/cuda_internal.h"
#include "util/common.h"

int cuda_profile_on = 0;

typedef struct {
    cudaEvent_t ev;
    const char *what;   // a launcher's __func__ or an interned name (static storage either way)
    const char *file;   // the launcher's __FILE__ (NULL for a GEMM's row)
    double host_s, flops;
    int after_wait;     // recorded when the host came back from a wait
} ProfRecord;

typedef struct {
    const char *what, *file;
    double launches, device_ms, host_ms, flops;
} ProfRow;

typedef struct {
    ProfRow *rows;
    int n, cap;
} ProfTable;

static struct {
    cudaStream_t stream;
    char json_path[1024];
    ProfRecord *recs;
    int n, cap;                 // records since the last fold (each with its own event, reused)
    cudaEvent_t last_ev;        // the previous fold's last event: where the next interval starts
    double last_host;
    int last_after_wait;        // the previous fold's last record was a wait's
    int boundaries;             // step boundaries seen
    int steps;                  // whole steps added to `total`
    ProfTable segment, total, all;
    char **names;               // interned names (GEMM shapes)
    int n_names, cap_names;
} P;

static const char IDLE[] = "(device idle: host waits)";
static const char IDLE_WORK[] = "(device idle: host work after a wait)";
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

int cuda_profile_open(cudaStream_t stream, char *err, size_t errlen) {
    const char *v = getenv("CTRON_KERNEL_TIMES");
    if (!v || !*v || !strcmp(v, "0") || cuda_profile_on) return 0;   // off, or another backend's stream is followed
    size_t len = strlen(v);
    int json = len > 5 && !strcmp(v + len - 5, ".json");
    if (strcmp(v, "1") && !json) {
        snprintf(err, errlen, "CTRON_KERNEL_TIMES='%s': expected 1 (a table on stderr) or FILE.json (the table and "
                 "FILE.json)", v);
        return -1;
    }
    if (json && len >= sizeof P.json_path) {
        snprintf(err, errlen, "CTRON_KERNEL_TIMES: a path of %zu characters (at most %zu)", len, sizeof P.json_path - 1);
        return -1;
    }
    if (json) {   // refused now, not after the run: the JSON is written when the backend closes
        char dir[sizeof P.json_path];
        const char *slash = strrchr(v, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - v) + 1 : 1, slash ? v : ".");
        if (access(dir, W_OK) != 0) {
            snprintf(err, errlen, "CTRON_KERNEL_TIMES='%s': cannot write in the directory '%s' (%s)", v, dir,
                     strerror(errno));
            return -1;
        }
    }
    memset(&P, 0, sizeof P);
    P.stream = stream;
    if (json) memcpy(P.json_path, v, len + 1);
    CUDA_CHECK(cudaEventCreate(&P.last_ev));
    CUDA_CHECK(cudaEventRecord(P.last_ev, stream));
    P.last_host = now_seconds();
    cuda_profile_on = 1;
    return 1;
}

static const char *intern(const char *text);

const char *cuda_profile_name(const char *text) {
    pthread_mutex_lock(&lock);
    const char *name = intern(text);
    pthread_mutex_unlock(&lock);
    return name;
}

static const char *intern(const char *text) {
    for (int i = 0; i < P.n_names; i++)
        if (!strcmp(P.names[i], text)) return P.names[i];
    if (P.n_names == P.cap_names) {
        int cap = P.cap_names ? 2 * P.cap_names : 64;
        P.names = xgrow(P.names, (size_t)P.cap_names * sizeof *P.names, (size_t)cap * sizeof *P.names);
        P.cap_names = cap;
    }
    size_t len = strlen(text) + 1;
    P.names[P.n_names] = xmalloc(len);
    memcpy(P.names[P.n_names], text, len);
    return P.names[P.n_names++];
}

static void note(const char *what, const char *file, double flops, int after_wait) {
    if (P.n == P.cap) {
        int cap = P.cap ? 2 * P.cap : 1024;
        P.recs = xgrow(P.recs, (size_t)P.cap * sizeof *P.recs, (size_t)cap * sizeof *P.recs);
        for (int i = P.cap; i < cap; i++) CUDA_CHECK(cudaEventCreate(&P.recs[i].ev));
        P.cap = cap;
    }
    ProfRecord *r = &P.recs[P.n++];
    CUDA_CHECK(cudaEventRecord(r->ev, P.stream));
    r->what = what;
    r->file = file;
    r->flops = flops;
    r->after_wait = after_wait;
    r->host_s = now_seconds();
}

void cuda_profile_note(const char *what, const char *file, double flops) {
    pthread_mutex_lock(&lock);
    note(what, file, flops, 0);
    pthread_mutex_unlock(&lock);
}

static void cuda_profile_waited(cudaStream_t stream) {
    pthread_mutex_lock(&lock);
    if (stream == P.stream) note(IDLE, NULL, 0.0, 1);
    pthread_mutex_unlock(&lock);
}

static ProfRow *row_of(ProfTable *t, const char *what, const char *file) {
    for (int i = 0; i < t->n; i++)
        if (t->rows[i].what == what && t->rows[i].file == file) return &t->rows[i];
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        t->rows = xgrow(t->rows, (size_t)t->cap * sizeof *t->rows, (size_t)cap * sizeof *t->rows);
        t->cap = cap;
    }
    ProfRow *r = &t->rows[t->n++];
    memset(r, 0, sizeof *r);
    r->what = what;
    r->file = file;
    return r;
}

static void table_add(ProfTable *to, const ProfTable *from) {
    for (int i = 0; i < from->n; i++) {
        ProfRow *r = row_of(to, from->rows[i].what, from->rows[i].file);
        r->launches += from->rows[i].launches;
        r->device_ms += from->rows[i].device_ms;
        r->host_ms += from->rows[i].host_ms;
        r->flops += from->rows[i].flops;
    }
}

// Every record's interval into the segment's table; the last record's event becomes the start of the next.
static void fold(void) {
    if (!P.n) return;
    CUDA_CHECK(cudaEventSynchronize(P.recs[P.n - 1].ev));
    for (int i = 0; i < P.n; i++) {
        const ProfRecord *r = &P.recs[i];
        cudaEvent_t from = i ? P.recs[i - 1].ev : P.last_ev;
        double from_host = i ? P.recs[i - 1].host_s : P.last_host;
        float elapsed = 0.0f;
        CUDA_CHECK(cudaEventElapsedTime(&elapsed, from, r->ev));
        double ms = elapsed, host_ms = 1e3 * (r->host_s - from_host);
        int drained = i ? P.recs[i - 1].after_wait : P.last_after_wait;
        if (drained && !r->after_wait) {   // the device waited for the host to queue this launch
            double idle = host_ms < ms ? host_ms : ms;
            row_of(&P.segment, IDLE_WORK, NULL)->device_ms += idle;
            ms -= idle;
        }
        ProfRow *row = row_of(&P.segment, r->what, r->file);
        row->launches += r->after_wait ? 0 : 1;
        row->device_ms += ms;
        row->host_ms += host_ms;
        row->flops += r->flops;
    }
    cudaEvent_t spare = P.last_ev;   // swapped, so every record keeps an event of its own
    P.last_ev = P.recs[P.n - 1].ev;
    P.recs[P.n - 1].ev = spare;
    P.last_host = P.recs[P.n - 1].host_s;
    P.last_after_wait = P.recs[P.n - 1].after_wait;
    P.n = 0;
}

static void release(void);
static void report_and_release(void);

static void end_segment(int whole_step) {
    fold();
    table_add(&P.all, &P.segment);
    if (whole_step) {
        table_add(&P.total, &P.segment);
        P.steps++;
    }
    P.segment.n = 0;
}

void cuda_profile_step(void) {
    if (!cuda_profile_on) return;
    pthread_mutex_lock(&lock);
    P.boundaries++;
    end_segment(P.boundaries >= 3);   // 1 ends the setup, 2 the warm-up step
    pthread_mutex_unlock(&lock);
}

// A launcher's row is named "function (file.cu)": the function that launched, in the kernel file it is in.
static void row_name(const ProfRow *r, char *out, size_t len) {
    if (!r->file) {
        snprintf(out, len, "%s", r->what);
        return;
    }
    const char *base = strrchr(r->file, '/');
    base = base ? base + 1 : r->file;
    size_t n = strlen(base);
    if (n > 7 && !strcmp(base + n - 7, ".cu.cpp")) n -= 4;   // the emulation's translated kernel files
    snprintf(out, len, "%s (%.*s)", r->what, (int)n, base);
}

static int by_device_time(const void *a, const void *b) {
    double x = ((const ProfRow *)a)->device_ms, y = ((const ProfRow *)b)->device_ms;
    return x < y ? 1 : x > y ? -1 : strcmp(((const ProfRow *)a)->what, ((const ProfRow *)b)->what);
}

static void report(FILE *f, FILE *js, const ProfTable *t, int steps, const char *scope) {
    double per = steps ? 1.0 / steps : 1.0, device = 0, host = 0, launches = 0;
    for (int i = 0; i < t->n; i++) {
        device += t->rows[i].device_ms;
        host += t->rows[i].host_ms;
        launches += t->rows[i].launches;
    }
    fprintf(f, "kernel times (CTRON_KERNEL_TIMES), %s: %.3f ms on the device%s (%.3f ms on the host's clock), "
            "%.0f launches\n", scope, per * device, steps ? " a step" : "", per * host, per * launches);
    fprintf(f, "| what | launches | device ms | share | host us/launch | TFLOP/s |\n|---|---:|---:|---:|---:|---:|\n");
    if (js) fprintf(js, "{\"scope\": \"%s\", \"steps\": %d, \"device_ms\": %.6f, \"host_ms\": %.6f, \"launches\": %.1f, "
                    "\"rows\": [", scope, steps, per * device, per * host, per * launches);
    for (int i = 0; i < t->n; i++) {
        const ProfRow *r = &t->rows[i];
        char name[160];
        row_name(r, name, sizeof name);
        char tf[32] = "";
        if (r->flops > 0 && r->device_ms > 0) snprintf(tf, sizeof tf, "%.1f", r->flops / (1e9 * r->device_ms));
        fprintf(f, "| %s | %.0f | %.3f | %.1f %% | %.1f | %s |\n", name, per * r->launches, per * r->device_ms,
                device > 0 ? 100.0 * r->device_ms / device : 0.0,
                r->launches > 0 ? 1e3 * r->host_ms / r->launches : 0.0, tf);
        if (js) fprintf(js, "%s\n  {\"what\": \"%s\", \"launches\": %.1f, \"device_ms\": %.6f, \"host_ms\": %.6f, "
                        "\"flops\": %.1f}", i ? "," : "", name, per * r->launches, per * r->device_ms,
                        per * r->host_ms, per * r->flops);
    }
    if (js) fprintf(js, "]}\n");
}

void cuda_profile_close(void) {
    if (!cuda_profile_on) return;
    pthread_mutex_lock(&lock);
    report_and_release();
    pthread_mutex_unlock(&lock);
}

static void report_and_release(void) {
    end_segment(0);
    cuda_profile_on = 0;
    ProfTable *t = P.steps ? &P.total : &P.all;
    double launches = 0;
    for (int i = 0; i < t->n; i++) launches += t->rows[i].launches;
    if (launches == 0) {   // a backend opened and closed without a launch (a device query): no report
        release();
        return;
    }
    qsort(t->rows, (size_t)t->n, sizeof *t->rows, by_device_time);
    char scope[96];
    if (P.steps) snprintf(scope, sizeof scope, "steps 2..%d (%d averaged)", P.steps + 1, P.steps);
    else snprintf(scope, sizeof scope, "every launch (no whole step after the first)");
    // The JSON goes to FILE.json.tmp, renamed when whole: never a half-written FILE.json.
    char tmp[sizeof P.json_path + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", P.json_path);
    FILE *js = NULL;
    if (P.json_path[0] && !(js = fopen(tmp, "w")))
        fprintf(stderr, "ctron: CTRON_KERNEL_TIMES: cannot write %s; the table follows\n", tmp);
    report(stderr, js, t, P.steps, scope);
    if (js && (fclose(js) != 0 || rename(tmp, P.json_path) != 0)) {
        fprintf(stderr, "ctron: CTRON_KERNEL_TIMES: writing %s failed\n", P.json_path);
        remove(tmp);
    }
    release();
}

// Everything the profiler holds, back; the next backend opened with the variable set starts afresh.
static void release(void) {
    for (int i = 0; i < P.cap; i++) cudaEventDestroy(P.recs[i].ev);
    cudaEventDestroy(P.last_ev);
    for (int i = 0; i < P.n_names; i++) free(P.names[i]);
    free(P.names);
    free(P.recs);
    free(P.segment.rows);
    free(P.total.rows);
    free(P.all.rows);
    memset(&P, 0, sizeof P);
}

void cuda_stream_wait(cudaStream_t stream) {
    CUDA_CHECK(cudaStreamSynchronize(stream));
    if (cuda_profile_on) cuda_profile_waited(stream);
}
