// Few-Bit GeLU (backend/cpu/gelu_fewbit.h): the tables are the optimum of the DP — for k = 1 against an
// exhaustive search over every boundary of the grid, for every k by local optimality (no boundary
// moved by one grid step, levels re-fitted, does better) — the error falls with k, and the codes
// round-trip: backward applies the level of the interval each input lies in.
#include <math.h>
#include <string.h>
#include "check.h"
#include "backend/cpu/gelu.h"
#include "backend/cpu/gelu_fewbit.h"
#include "util/common.h"

enum { G = FEWBIT_GRID };
static double X[G], W[G], D[G];

// Error of the fit whose runs start at grid indices start[0] = 0 < start[1] < ... (levels = means).
static double fit_error(const int *start, int levels) {
    double err = 0.0, wsum = 0.0;
    for (int j = 0; j < levels; j++) {
        int a = start[j], b = j + 1 < levels ? start[j + 1] : G;
        double sw = 0, s1 = 0;
        for (int i = a; i < b; i++) { sw += W[i]; s1 += W[i] * D[i]; }
        double mean = s1 / sw;
        for (int i = a; i < b; i++) err += W[i] * (D[i] - mean) * (D[i] - mean);
    }
    for (int i = 0; i < G; i++) wsum += W[i];
    return err / wsum;
}

int main(void) {
    fewbit_gelu_grid(X, W, D);
    double prev = INFINITY;
    for (int k = 1; k <= FEWBIT_MAX_BITS; k++) {
        const FewBitGelu *t = fewbit_gelu_table(k);
        int L = t->levels, start[16] = {0};
        // the table's boundaries as grid run starts
        for (int j = 1; j < L; j++) {
            int i = 0;
            while (i < G && X[i] < t->bound[j - 1]) i++;
            start[j] = i;
        }
        double mine = fit_error(start, L);
        CHECK(fabs(mine - t->mse) <= 1e-9 * t->mse + 1e-15, "k=%d: table error %.6e vs recomputed %.6e", k, t->mse, mine);
        CHECK(t->mse < prev, "k=%d: error %.3e did not fall (k-1: %.3e)", k, t->mse, prev);
        prev = t->mse;
        for (int j = 1; j < L; j++)
            for (int dir = -1; dir <= 1; dir += 2) {
                int moved[16];
                memcpy(moved, start, sizeof moved);
                moved[j] += dir;
                if (moved[j] <= moved[j - 1] || (j + 1 < L && moved[j] >= moved[j + 1]) || moved[j] >= G) continue;
                CHECK(fit_error(moved, L) >= mine - 1e-15, "k=%d: moving boundary %d by %d improves the fit", k, j, dir);
            }
        if (k == 1) {   // exhaustive: every single boundary
            double best = INFINITY;
            for (int b = 1; b < G; b++) {
                int st[2] = {0, b};
                double e = fit_error(st, 2);
                best = e < best ? e : best;
            }
            CHECK(fabs(best - t->mse) <= 1e-12, "k=1: exhaustive optimum %.9e, DP %.9e", best, t->mse);
        }
        // encode + backward == the level of each input's interval
        enum { N = 1003 };
        float x[N], dy[N], dx[N];
        uint8_t codes[(N * 4 + 7) / 8 + 1];
        for (int i = 0; i < N; i++) { x[i] = -6.0f + 12.0f * (float)i / (N - 1); dy[i] = 1.0f + (float)(i % 7); }
        fewbit_gelu_encode(codes, x, N, t);
        fewbit_gelu_backward(dx, dy, codes, N, t);
        int ok = 1;
        double rms = 0.0;
        for (int i = 0; i < N; i++) {
            int c = 0;
            while (c < L - 1 && x[i] >= t->bound[c]) c++;
            if (dx[i] != dy[i] * t->slope[c]) ok = 0;
        }
        CHECK(ok, "k=%d: encode/backward do not apply the level of the input's interval", k);
        // the error of the derivative against exact GeLU′ at N(0,1)-distributed points
        float g1[1] = {1.0f};
        for (int i = 0; i < G; i++) {
            float xi = (float)X[i], exact[1];
            gelu_backward(exact, g1, &xi, 1);
            int c = 0;
            while (c < L - 1 && xi >= t->bound[c]) c++;
            rms += W[i] * ((double)exact[0] - t->slope[c]) * ((double)exact[0] - t->slope[c]);
        }
        printf("k=%d: %2d levels, E[(GeLU' - q)^2] = %.3e (rms %.4f), boundaries", k, L, t->mse, sqrt(rms));
        for (int j = 0; j < L - 1; j++) printf(" %.2f", (double)t->bound[j]);
        printf("\n");
        CHECK(fabs(rms - t->mse) < 1e-6, "k=%d: error against the fp32 GeLU' %.3e vs the table's %.3e", k, rms, t->mse);
    }
    return check_summary();
}
