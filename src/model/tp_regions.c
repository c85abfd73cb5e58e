#include "model/tp_regions.h"
#include "parallel/comm_device.h"

static void count(GPT *m, TPCommPurpose why, CommKind kind, size_t full_floats) {
    m->comm_bytes[why] += comm_bytes_for(kind, m->tp.t, (uint64_t)full_floats * sizeof(float));
}

const float *tp_gather_rows(GPT *m, const float *x, float *buf, int w, TPCommPurpose why) {
    if (m->tp.t <= 1 || !m->tp.sp) return x;
    size_t chunk = (size_t)m->s_rank * m->b_cur * w;
    comm_device_allgather(m->tp.group, x, buf, chunk);
    count(m, why, COMM_ALLGATHER, chunk * (size_t)m->tp.t);
    return buf;
}

float *tp_reduce_rows(GPT *m, float *partial, float *out, int w, TPCommPurpose why) {
    if (m->tp.t <= 1) return partial;
    size_t full = (size_t)m->s_cur * m->b_cur * w;
    if (!m->tp.sp) {
        comm_device_allreduce_sum(m->tp.group, partial, partial, full);
        count(m, why, COMM_ALLREDUCE, full);
        return partial;
    }
    comm_device_reduce_scatter_sum(m->tp.group, partial, out, full / (size_t)m->tp.t);
    count(m, why, COMM_REDUCE_SCATTER, full);
    return out;
}

void tp_allgather(GPT *m, const float *send, float *all, size_t n, TPCommPurpose why) {
    comm_device_allgather(m->tp.group, send, all, n);
    count(m, why, COMM_ALLGATHER, n * (size_t)m->tp.t);
}

void tp_allreduce(GPT *m, float *x, size_t n, TPCommPurpose why) {
    if (m->tp.t <= 1) return;
    comm_device_allreduce_sum(m->tp.group, x, x, n);
    count(m, why, COMM_ALLREDUCE, n);
}
