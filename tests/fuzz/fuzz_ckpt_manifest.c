// A checkpoint's checksums.txt (io/ckpt_manifest.h): parsed with a message naming the line,
// whatever the file holds; what parses has plain, unique names.
#include "fuzz_input.h"
#include "io/ckpt_manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size, CKPT_MANIFEST_FILE);
    char dir[128], err[1024];
    CkptManifest m;
    if (ckpt_manifest_read(fuzz_dir_of(path, dir, sizeof dir), &m, err, sizeof err) == 0) {
        if (m.n > CKPT_MANIFEST_MAX) abort();
        for (int i = 0; i < m.n; i++) {
            if (!m.e[i].name[0] || m.e[i].name[0] == '.' || strchr(m.e[i].name, '/')) abort();
            for (int j = 0; j < i; j++)
                if (strcmp(m.e[i].name, m.e[j].name) == 0) abort();
        }
        // Verifying against the scratch directory must fail cleanly (the files are not there).
        ckpt_manifest_verify(dir, &m, err, sizeof err);
    } else if (!err[0]) {
        abort();   // every refusal says why
    }
    return 0;
}
