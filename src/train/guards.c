#include "train/guards.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <time.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/common.h"
#include "util/fileio.h"

int guard_first_nonfinite(const GPT *m, CommGroup *world, size_t *counts) {
    int first = -1, none = 4 + 12 * m->cfg.layers;   // indices in the whole model's list (full_index)
    // every tensor in one multi-tensor pass (one read-back on a GPU)
    size_t cap = (size_t)(m->n_info ? m->n_info : 1), *bad = xmalloc(cap * sizeof *bad), *n = xmalloc(cap * sizeof *n);
    const float **g = xmalloc(cap * sizeof *g);
    for (int i = 0; i < m->n_info; i++) {
        g[i] = m->grads + m->info[i].offset;
        n[i] = m->info[i].numel;
    }
    if (m->n_info) m->be->tensor_stats_multi(m->be, g, n, m->n_info, NULL, bad);
    for (int i = 0; i < m->n_info; i++) {
        if (counts) counts[i] = bad[i];
        if (bad[i] && first < 0) first = m->info[i].full_index;
    }
    free(bad);
    free(n);
    free(g);
    if (world->size == 1) return first;
    // The smallest index over the ranks (TP shards differ; pipeline stages hold different tensors).
    float *all = xmalloc((size_t)world->size * sizeof(float)), mine = first < 0 ? (float)none : (float)first;
    comm_allgather(world, &mine, all, 1);
    int best = none;
    for (int r = 0; r < world->size; r++) best = (int)all[r] < best ? (int)all[r] : best;
    free(all);
    return best < none ? best : -1;
}

int guard_write_diagnostic(const char *path, const GPT *m, int step, double loss, double norm, int first,
                           const size_t *counts, int bad_steps, char *err, size_t errlen) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "step", step);
    cJSON_AddStringToObject(o, "loss", isfinite(loss) ? "finite" : isnan(loss) ? "nan" : "inf");
    if (isfinite(loss)) cJSON_AddNumberToObject(o, "loss_value", loss);
    cJSON_AddStringToObject(o, "grad_norm", isfinite(norm) ? "finite" : isnan(norm) ? "nan" : "inf");
    cJSON_AddNumberToObject(o, "consecutive_bad_steps", bad_steps);
    char first_name[48] = "";
    if (first >= 0) gpt_param_full_name(&m->cfg, first, first_name, sizeof first_name);
    cJSON_AddStringToObject(o, "first_nonfinite_gradient", first_name);
    cJSON *t = cJSON_AddObjectToObject(o, "nonfinite_elements_rank0");
    for (int i = 0; i < m->n_info; i++)
        if (counts[i]) cJSON_AddNumberToObject(t, m->info[i].name, (double)counts[i]);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    const void *parts[2] = {text, "\n"};
    size_t sizes[2] = {strlen(text), 1};
    char why[512];
    int rc = fileio_write_atomic(path, parts, sizes, 2, why, sizeof why);
    cJSON_free(text);
    if (rc != 0) snprintf(err, errlen, "the diagnostic: %s", why);
    return rc;
}

void guard_test_inject_nan(GPT *m, int step, int world_rank) {
    const char *spec = getenv("CTRON_TEST_NAN_STEPS");
    if (!spec || world_rank != 0) return;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ","))
        if (atoi(tok) == step) {
            const ParamInfo *pi = gpt_find_param(m, "h.0.mlp.c_fc.weight");
            if (pi) m->grads[pi->offset] = NAN;
        }
}

static volatile sig_atomic_t pending;

static void on_signal(int sig) {
    if (pending) {   // the second one: the default action, now
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    pending = sig;
}

void guard_test_slow_step(void) {
    const char *ms = getenv("CTRON_TEST_STEP_SLEEP_MS");
    if (!ms || atoi(ms) <= 0) return;
    struct timespec left = {atoi(ms) / 1000, (long)(atoi(ms) % 1000) * 1000000L};
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {}
}

void guard_install_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);   // a closed terminal or a lost ssh session: save, as for SIGTERM
    // What scripts/ctron-mpirun turns a SIGTERM into: Open MPI's mpirun forwards SIGUSR1 to every rank at
    // once, whereas its own SIGTERM handling sends SIGKILL one second after SIGTERM (docs/RELIABILITY.md).
    sigaction(SIGUSR1, &sa, NULL);
    // A write past a file-size limit fails with EFBIG (reported) instead of killing the process.
    signal(SIGXFSZ, SIG_IGN);
}

int guard_signal_pending(void) { return (int)pending; }

int guard_signal_agree(CommGroup *w) {
    int mine = (int)pending;
    if (w->size == 1) return mine;
    // Each rank's signal, so that every rank stops together and names the same one.
    float me = (float)mine, *all = xmalloc((size_t)w->size * sizeof(float));
    comm_allgather(w, &me, all, 1);
    int sig = 0;
    for (int r = 0; r < w->size && !sig; r++) sig = (int)all[r];
    free(all);
    return sig;
}

const char *guard_signal_name(int sig) {
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : sig == SIGUSR1 ? "SIGUSR1"
                                                                                                  : "a signal";
}
