#include "memory/fig7_svg.h"
#include <errno.h>
#include <string.h>
#include "util/fileio.h"

// The bars of one group, in the paper's order; "no parallelism" (≈ 5× the baseline) would flatten
// every other bar, so it is left to the table.
static const Technique bars[] = {TECH_TP, TECH_TP_SP, TECH_TP_SELECTIVE, TECH_TP_SP_SELECTIVE, TECH_FULL};
static const char *colours[] = {"#8c8c8c", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"};
enum { NBARS = 5 };

static void text_escaped(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '&') fputs("&amp;", f);
        else if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

void fig7_svg_write(FILE *f, const MemoryConfig *cs, int n) {
    const double bar_w = 26, gap = 36, top = 72, plot_h = 300;
    double left = 80;
    double group_w = NBARS * bar_w + gap, plot_w = n * group_w + gap;
    double width = left + plot_w + 30, height = top + plot_h + 130;
    if (width < 660) {   // room for the title and the legend: centre a narrow chart
        left += (660 - width) / 2;
        width = 660;
    }
    double y0 = top + plot_h;   // the 0 % line
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
               "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n", width, height, width, height);
    fprintf(f, "  <rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "  <text x=\"%.0f\" y=\"24\" font-size=\"15\" font-weight=\"bold\" text-anchor=\"middle\">"
               "Activation memory per layer per rank, relative to tensor parallelism</text>\n", width / 2);
    fprintf(f, "  <text x=\"%.0f\" y=\"42\" text-anchor=\"middle\" fill=\"#555\">after Korthikanti et al., Figure 7 "
               "(2-byte activations, 1-byte dropout masks)</text>\n", width / 2);
    // Grid and y axis: 0 … 100 % in steps of 20.
    for (int p = 0; p <= 100; p += 20) {
        double y = y0 - plot_h * p / 100.0;
        fprintf(f, "  <line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1\"/>\n", left,
                y, left + plot_w, y, p == 0 ? "#000" : "#ddd");
        fprintf(f, "  <text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%d%%</text>\n", left - 8, y + 4, p);
    }
    fprintf(f, "  <line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#000\"/>\n", left, top, left, y0);
    fprintf(f, "  <text transform=\"translate(%.0f %.0f) rotate(-90)\" text-anchor=\"middle\">"
               "activation bytes per layer (%% of TP baseline)</text>\n", left - 50, top + plot_h / 2);
    for (int i = 0; i < n; i++) {
        MemorySummary m;
        memory_summarize(&cs[i], &m);
        double gx = left + gap + i * group_w;
        for (int k = 0; k < NBARS; k++) {
            double x = gx + k * bar_w;
            if (!m.tech_ok[bars[k]]) {
                fprintf(f, "  <text x=\"%.1f\" y=\"%.1f\" font-size=\"9\" text-anchor=\"middle\">n/a</text>\n",
                        x + bar_w / 2, y0 - 4);
                continue;
            }
            double pct = m.tech_pct[bars[k]], hgt = plot_h * (pct > 100 ? 100 : pct) / 100.0;
            fprintf(f, "  <rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
                       "<title>%s: %.1f%%</title></rect>\n", x + 1, y0 - hgt, bar_w - 2, hgt, colours[k],
                    technique_label(bars[k]), pct);
            fprintf(f, "  <text x=\"%.1f\" y=\"%.1f\" font-size=\"9\" text-anchor=\"middle\">%.1f</text>\n",
                    x + bar_w / 2, y0 - hgt - 3, pct);
        }
        fprintf(f, "  <text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" font-weight=\"bold\">", gx + NBARS * bar_w / 2,
                y0 + 18);
        text_escaped(f, cs[i].name);
        fprintf(f, "</text>\n  <text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" font-size=\"10\" fill=\"#555\">"
                   "t=%d, s=%ld, a=%ld, h=%ld</text>\n", gx + NBARS * bar_w / 2, y0 + 32, cs[i].lay.sh.t,
                cs[i].lay.sh.s, cs[i].lay.sh.a, cs[i].lay.sh.h);
    }
    fprintf(f, "  <text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">model (tensor-parallel size t)</text>\n",
            left + plot_w / 2, y0 + 52);
    // Legend: one row under the axis title.
    double lx = 30, ly = y0 + 80;
    for (int k = 0; k < NBARS; k++) {
        fprintf(f, "  <rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"%s\"/>\n", lx, ly - 10, colours[k]);
        fprintf(f, "  <text x=\"%.0f\" y=\"%.0f\">", lx + 16, ly);
        text_escaped(f, technique_label(bars[k]));
        fprintf(f, "</text>\n");
        lx += 16 + 6.5 * (double)strlen(technique_label(bars[k])) + 18;
        if (k + 1 < NBARS && lx + 16 + 6.5 * (double)strlen(technique_label(bars[k + 1])) > width - 10) {
            lx = 30;
            ly += 20;
        }
    }
    fprintf(f, "</svg>\n");
}

int fig7_svg_save(const char *path, const MemoryConfig *cs, int n, char *err, size_t errlen) {
    char why[512];
    FILE *f = fileio_fopen_out(path, 0, why, sizeof why);
    if (!f) {
        snprintf(err, errlen, "--plot: %s", why);
        return -1;
    }
    fig7_svg_write(f, cs, n);
    if (fclose(f) != 0) {
        snprintf(err, errlen, "--plot: writing '%s' failed: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}
