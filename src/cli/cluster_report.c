// The cluster planner's reports: the ranked table, the JSON object (the interface scripts rely
// on: docs/CLI.md), --explain, and the SVG of the top layouts' time parts.
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cluster_cmd.h"
#include "util/fileio.h"
#include "memory/cluster_time.h"

#define GIB 1073741824.0

void cluster_layout_str(const ClusterLayout *l, char *buf, size_t len) {
    int n = snprintf(buf, len, "t=%d,p=%d,v=%d,d=%d,mb=%d,sp=%s,recompute=%s,zero=%d", l->t, l->p, l->v, l->d, l->mb,
                     l->sp ? "on" : "off", cluster_recompute_name(l->rc), l->zero);
    if (n > 0 && (size_t)n < len && l->first) n += snprintf(buf + n, len - (size_t)n, ",first=%d", l->first > 0 ? l->first : 0);
    if (n > 0 && (size_t)n < len && l->last) snprintf(buf + n, len - (size_t)n, ",last=%d", l->last > 0 ? l->last : 0);
}

static double comm_share(const ClusterPrediction *c) {
    return (c->part[PART_TP_COMM] + c->part[PART_PP_COMM] + c->part[PART_DP_COMM]) / c->step_s;
}

void cluster_print_table(FILE *f, const ClusterJob *job, const GpuSpec *gpu, const ClusterPrediction *c, int n) {
    fprintf(f, "model L=%ld h=%ld a=%ld v=%ld s=%ld, global batch %ld; %d×%d %s (%.0f GiB, %.0f TFLOP/s)\n", job->L,
            job->h, job->a, job->v, job->s, job->B, job->nodes, job->gpus_per_node, gpu->name, gpu->mem_bytes / GIB,
            gpu->peak_flops / 1e12);
    char d[32] = "";
    if (job->head_dim > 0 && job->head_dim * job->a != job->h) snprintf(d, sizeof d, " d=%ld", job->head_dim);
    char w[48] = "";
    if (job->window > 0) snprintf(w, sizeof w, ", sliding window %ld", job->window);
    if (job->arch != ARCH_GPT2)   // GPT-2's header is the line above alone
        fprintf(f, "block %s: kv=%ld%s ffn=%ld, output layer %s%s%s%s\n", arch_spec((ArchKind)job->arch)->name, job->kv,
                d, job->ffn, job->tie < 0 ? "untied" : "tied", job->qk_norm ? ", q/k norms" : "",
                job->fused_proj ? ", fused qkv_proj, gate_up_proj" : "", w);
    fprintf(f, "%4s %3s %3s %2s %5s %3s %3s %-9s %4s %9s %9s %6s %6s %7s %6s %7s  %s\n", "rank", "t", "p", "v", "d", "mb",
            "sp", "recompute", "zero", "mem GiB", "step s", "MFU", "HFU", "bubble", "comm", "recomp", "fits");
    for (int i = 0; i < n; i++) {
        const ClusterLayout *l = &c[i].lay;
        fprintf(f, "%4d %3d %3d %2d %5d %3d %3s %-9s %4d %9.1f %9.4g %5.1f%% %5.1f%% %6.1f%% %5.1f%% %6.1f%%  %s%s\n",
                i + 1, l->t, l->p, l->v, l->d, l->mb, l->sp ? "on" : "off", cluster_recompute_name(l->rc), l->zero,
                c[i].mem_max / GIB, c[i].step_s, 100 * c[i].mfu, 100 * c[i].hfu, 100 * c[i].part[PART_BUBBLE] / c[i].step_s,
                100 * comm_share(&c[i]), 100 * c[i].part[PART_RECOMPUTE] / c[i].step_s, c[i].fits ? "yes" : "no: ",
                c[i].fits ? "" : c[i].reason);
    }
}

// Every stage's memory by part, bytes (the pipeline's in-flight micro-batches are in activations; in_flight
// says how many micro-batches' worth of the stage's layers that is).
static void add_stages(cJSON *o, const ClusterPrediction *c) {
    cJSON *st = cJSON_AddArrayToObject(o, "stages");
    for (int r = 0; r < c->n_stages; r++) {
        const StageMemory *m = &c->mem[r];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "stage", r);
        cJSON_AddNumberToObject(x, "layers", m->layers);
        cJSON_AddNumberToObject(x, "in_flight", m->in_flight);
        cJSON_AddNumberToObject(x, "weights", m->weights);
        cJSON_AddNumberToObject(x, "grads", m->grads);
        cJSON_AddNumberToObject(x, "optimizer", m->optimizer);
        cJSON_AddNumberToObject(x, "activations", m->activations);
        cJSON_AddNumberToObject(x, "workspace", m->workspace);
        cJSON_AddNumberToObject(x, "reserve", m->reserve);
        cJSON_AddNumberToObject(x, "total", m->total);
        cJSON_AddNumberToObject(x, "full", m->n_full);
        cJSON_AddNumberToObject(x, "selective", m->n_sel);
        cJSON_AddItemToArray(st, x);
    }
}

void cluster_print_json(FILE *f, const ClusterPrediction *c, int n) {
    cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "layouts");
    for (int i = 0; i < n; i++) {
        const ClusterLayout *l = &c[i].lay;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "t", l->t);
        cJSON_AddNumberToObject(o, "p", l->p);
        cJSON_AddNumberToObject(o, "v", l->v);
        cJSON_AddNumberToObject(o, "d", l->d);
        cJSON_AddNumberToObject(o, "mb", l->mb);
        cJSON_AddBoolToObject(o, "sp", l->sp);
        cJSON_AddStringToObject(o, "recompute", cluster_recompute_name(l->rc));
        cJSON_AddNumberToObject(o, "zero", l->zero);
        // the layers of a stated first / last stage (0: the embedding or the head alone), null: an even share
        if (l->first) cJSON_AddNumberToObject(o, "first", l->first > 0 ? l->first : 0);
        else cJSON_AddNullToObject(o, "first");
        if (l->last) cJSON_AddNumberToObject(o, "last", l->last > 0 ? l->last : 0);
        else cJSON_AddNullToObject(o, "last");
        cJSON_AddNumberToObject(o, "step_s", c[i].step_s);
        cJSON_AddNumberToObject(o, "mfu", c[i].mfu);
        cJSON_AddNumberToObject(o, "hfu", c[i].hfu);
        cJSON_AddNumberToObject(o, "mem_bytes_max", c[i].mem_max);
        cJSON_AddBoolToObject(o, "fits", c[i].fits);
        cJSON *parts = cJSON_AddObjectToObject(o, "parts");
        for (int k = 0; k < PART_COUNT; k++) cJSON_AddNumberToObject(parts, cluster_part_name((TimePart)k), c[i].part[k]);
        if (c[i].mem) add_stages(o, &c[i]);
        cJSON_AddItemToArray(arr, o);
    }
    char *s = cJSON_Print(root);
    fprintf(f, "%s\n", s);
    free(s);
    cJSON_Delete(root);
}

static void stage_row(FILE *f, int r, const StageMemory *m) {
    fprintf(f, "  %5d %9.2f %9.2f %9.2f %11.2f %9.2f %8.2f %9.2f   %d layers × %.3g in flight: %d full, %d selective\n", r,
            m->weights / GIB, m->grads / GIB, m->optimizer / GIB, m->activations / GIB, m->workspace / GIB, m->reserve / GIB,
            m->total / GIB, m->layers, m->in_flight, m->n_full, m->n_sel);
}

void cluster_print_explain(FILE *f, const ClusterJob *job, const GpuSpec *g, const ClusterPrediction *c) {
    char lay[160];
    cluster_layout_str(&c->lay, lay, sizeof lay);
    fprintf(f, "\nexplain %s\n", lay);
    fprintf(f, "  %ld micro-batches per pipeline per step; slowest stage %d; step %.4g s, MFU %.1f%%, HFU %.1f%%\n",
            c->microbatches, c->slowest_stage, c->step_s, 100 * c->mfu, 100 * c->hfu);
    fprintf(f, "time by part (the slowest stage's micro-batches, then the schedule and the step's ends):\n");
    for (int k = 0; k < PART_COUNT; k++)
        fprintf(f, "  %-12s %10.4g s %6.1f%%  %s\n", cluster_part_name((TimePart)k), c->part[k],
                100 * c->part[k] / c->step_s, cluster_part_label((TimePart)k));
    if (c->lay.rc == CR_PLAN && cluster_stage_layers(job, &c->lay, 0) == 0) {
        fprintf(f, "stage 0 holds the embedding alone: no layers to plan\n");
    } else if (c->lay.rc == CR_PLAN) {
        char flags[512];
        int l0 = cluster_stage_layers(job, &c->lay, 0);
        plan_flags(&c->plan0, l0, flags, sizeof flags);
        fprintf(f, "stage 0's plan (ctron train flags over its %d layers): %s\n", l0, flags);
    }
    if (c->mem) {
        fprintf(f, "memory per GPU by part and stage, GiB (worst: stage %d, %.2f of %.2f GiB):\n", c->worst_stage,
                c->mem_max / GIB, g->mem_bytes / GIB);
        fprintf(f, "  %5s %9s %9s %9s %11s %9s %8s %9s   %s\n", "stage", "weights", "grads", "optimizer", "activations",
                "workspace", "reserve", "total", "recompute");
        for (int r = 0; r < c->n_stages; r++) {
            // long pipelines: the first four, the worst, the last two
            if (c->n_stages > 8 && r >= 4 && r < c->n_stages - 2 && r != c->worst_stage) {
                if (r == 4) fprintf(f, "  %5s\n", "…");
                continue;
            }
            stage_row(f, r, &c->mem[r]);
        }
    }
    fprintf(f, "constants (%s; sources: docs/PLANNER.md):\n", g->name);
    fprintf(f, "  peak %.4g TFLOP/s, memory %.4g GiB, HBM %.4g GB/s, NVLink %.4g GB/s, inter-node %.4g GB/s per GPU\n",
            g->peak_flops / 1e12, g->mem_bytes / GIB, g->hbm_bw / 1e9, g->nvlink_bw / 1e9, g->internode_bw / 1e9);
    fprintf(f, "  GEMM: %d units of %d×%d tiles (wave quantisation), %.2f of peak at full waves; HBM %.2f of spec;\n",
            g->sms, g->tile_m, g->tile_n, g->gemm_eff, g->hbm_eff);
    fprintf(f, "  links %.2f of spec (ring bus bandwidth), %.3g us per ring step; an overlapped collective costs %.2f\n",
            g->link_eff, g->link_latency * 1e6, g->overlap_cost);
    fprintf(f, "  of its time; %.3g us between kernels; reserve %.3g GiB per GPU; %d-byte activations\n",
            g->launch_gap * 1e6, job->reserve_bytes / GIB, job->e);
    fprintf(f, "  %s attention; the linears' GEMMs in %s", job->flash ? "flash" : "standard",
            job->fp8 ? "FP8" : job->e == 2 ? "bf16" : "fp32");
    if (job->fp8) fprintf(f, " (peak %.4g TFLOP/s)", g->fp8_flops / 1e12);
    fprintf(f, "\n");
    fprintf(f, "  TP overlap %s; ", cluster_tp_overlap_name((TpOverlap)job->tp_overlap));
    if (c->lay.d <= 1) fprintf(f, "no DP (d = 1)\n");
    else
        fprintf(f, "DP: %s gradients %s the backward over %.4g GB/s per GPU%s\n", job->grad_bytes == 2 ? "bf16" : "fp32",
                job->dp_overlap ? "reduced in buckets overlapping" : "reduced after",
                cluster_dp_bandwidth(job, g, &c->lay) / 1e9,
                c->lay.zero ? " (ZeRO-1: reduce-scatter, then the weights' all-gather)" : "");
}

static const char *part_colours[PART_COUNT] = {"#1f77b4", "#aec7e8", "#9edae5", "#17becf", "#d62728",
                                               "#ff7f0e", "#ffbb78", "#e377c2", "#7f7f7f", "#2ca02c"};

int cluster_svg_save(const char *path, const ClusterJob *job, const GpuSpec *gpu, const ClusterPrediction *c, int n,
                     char *err, size_t errlen) {
    char why[512];
    FILE *f = fileio_fopen_out(path, 0, why, sizeof why);
    if (!f) return snprintf(err, errlen, "--svg: %s", why), -1;
    const double left = 330, bar_h = 24, gap = 12, top = 60, plot_w = 520;
    double height = top + n * (bar_h + gap) + 110, width = left + plot_w + 90, tmax = 0;
    for (int i = 0; i < n; i++)
        if (c[i].step_s > tmax) tmax = c[i].step_s;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
               "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n", width, height, width, height);
    fprintf(f, "  <rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "  <text x=\"%.0f\" y=\"24\" font-size=\"15\" font-weight=\"bold\" text-anchor=\"middle\">Predicted step "
               "time by part, the %d fastest layouts</text>\n", width / 2, n);
    fprintf(f, "  <text x=\"%.0f\" y=\"42\" text-anchor=\"middle\" fill=\"#555\">L=%ld h=%ld s=%ld, batch %ld on %d×%d %s "
               "(ctron plan --cluster)</text>\n", width / 2, job->L, job->h, job->s, job->B, job->nodes, job->gpus_per_node,
            gpu->name);
    for (int i = 0; i < n; i++) {
        double y = top + i * (bar_h + gap), x = left;
        char lay[160];
        cluster_layout_str(&c[i].lay, lay, sizeof lay);
        fprintf(f, "  <text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"10\">%s</text>\n", left - 6,
                y + bar_h / 2 + 4, lay);
        for (int k = 0; k < PART_COUNT; k++) {
            double w = plot_w * c[i].part[k] / tmax;
            if (w <= 0) continue;
            fprintf(f, "  <rect x=\"%.1f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\"><title>%s: %.4g s</title>"
                       "</rect>\n", x, y, w, bar_h, part_colours[k], cluster_part_name((TimePart)k), c[i].part[k]);
            x += w;
        }
        fprintf(f, "  <text x=\"%.1f\" y=\"%.1f\" font-size=\"10\">%.3g s</text>\n", x + 4, y + bar_h / 2 + 4, c[i].step_s);
    }
    double ly = top + n * (bar_h + gap) + 20, lx = 20;
    for (int k = 0; k < PART_COUNT; k++) {
        if (k == 5) { lx = 20; ly += 20; }
        fprintf(f, "  <rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"%s\"/>\n", lx, ly - 10, part_colours[k]);
        fprintf(f, "  <text x=\"%.0f\" y=\"%.0f\">%s</text>\n", lx + 16, ly, cluster_part_name((TimePart)k));
        lx += 16 + 7.0 * (double)strlen(cluster_part_name((TimePart)k)) + 24;
    }
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0) return snprintf(err, errlen, "--svg: writing '%s' failed: %s", path, strerror(errno)), -1;
    return 0;
}
