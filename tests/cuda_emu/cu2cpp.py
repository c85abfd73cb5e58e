#!/usr/bin/env python3
"""cu2cpp.py IN.cu OUT.cpp: the CUDA emulation's one source rewrite, so that g++ compiles a kernel file as
host C++ (with -include cuda_emu.h). Three forms change, in place, on their own lines (a `#line` directive
keeps every diagnostic and __FILE__/__LINE__ pointing at IN.cu):
  K<<<grid, block, smem, stream>>>(args)
      -> ct_emu::launch("K", BOUND, ct_emu::Cfg(grid, block, smem, stream), K)(args)
         (BOUND: K's __launch_bounds__ in this file, else 1024: the GPU refuses a launch above it)
  extern __shared__ [__align__(n)] T name[];
      -> T *name = (T *)ct_emu::dynamic_smem();
  __shared__ [__align__(n)] T name[N]...;
      -> auto &name = ct_emu::block_shared<T[N]..., __COUNTER__>(__FILE__, __LINE__);
         (one array per block, poisoned at each block's start)
Anything else that names __shared__ is an error here, not a silent miscompile."""
import re
import sys


def rewrite(src, path):
    bounds = {m.group(2): m.group(1).strip()
              for m in re.finditer(r'__launch_bounds__\(\s*([^,)]+)[^)]*\)\s*(\w+)\s*\(', src)}

    def launch(m):
        kernel, cfg = m.group(1).strip(), m.group(2).strip()
        base = re.sub(r'<.*', '', kernel)
        bound = f'(unsigned)({bounds[base]})' if base in bounds else '1024u'
        return f'ct_emu::launch("{kernel}", {bound}, ct_emu::Cfg({cfg}), {kernel})('

    # kernel: an identifier with optional template arguments (one level of nesting); cfg up to >>>
    out = re.sub(r'([A-Za-z_][\w:]*(?:<[^;<>]*(?:<[^;<>]*>[^;<>]*)*>)?)\s*<<<(.*?)>>>\s*\(', launch, src, flags=re.S)
    align = r'(?:__align__\(\s*\d+\s*\)\s+)?'
    out = re.sub(r'extern\s+__shared__\s+' + align + r'([A-Za-z_][\w\s]*?)\s+(\w+)\s*\[\s*\]\s*;',
                 lambda m: f'{m.group(1)} *{m.group(2)} = ({m.group(1)} *)ct_emu::dynamic_smem();', out)
    out = re.sub(r'(?<![\w])__shared__\s+' + align + r'([A-Za-z_][\w\s]*?)\s+(\w+)\s*((?:\[[^\]]+\]\s*)+);',
                 lambda m: f'auto &{m.group(2)} = ct_emu::block_shared<{m.group(1)}{m.group(3).strip()}, __COUNTER__>'
                           f'(__FILE__, __LINE__);', out)
    for n, line in enumerate(out.split('\n'), 1):
        code = line.split('//')[0]
        if '__shared__' in code or '<<<' in code:
            sys.exit(f'{path}:{n}: cu2cpp.py cannot rewrite this line for the CUDA emulation: {line.strip()}')
    return f'#line 1 "{path}"\n' + out


if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit('usage: cu2cpp.py IN.cu OUT.cpp')
    with open(sys.argv[1]) as f:
        text = rewrite(f.read(), sys.argv[1])
    with open(sys.argv[2], 'w') as f:
        f.write(text)
