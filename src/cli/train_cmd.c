#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "cli/cli.h"
#include "cli/train_passes.h"
#include "cli/train_run_dir.h"
#include "parallel/comm.h"

void cli_train_usage(FILE *f) {
    fprintf(f,
        "usage: ctron train [options]\n"
        "\n"
        "model shape\n"
        "  --layers N        transformer blocks (default 2)\n"
        "  --hidden N        hidden size h, divisible by --heads (default 64)\n"
        "  --heads N         attention heads a (default 4)\n"
        "  --seq N           sequence length s (default 64)\n"
        "  --batch N         micro-batch size b, sequences (default 8)\n"
        "  --vocab N         vocabulary size v, at least 256 for byte-level data (default 256)\n"
        "  --dropout P       dropout probability, 0 <= P < 1 (default 0.1)\n"
        "  --arch gpt2|llama the block (docs/LLAMA.md): GPT-2 (LayerNorm, GeLU MLP, learned positions, tied\n"
        "                    output layer) or Llama (RMSNorm, SwiGLU MLP, RoPE, grouped-query attention, no\n"
        "                    biases, untied output layer, dropout 0 by default) (default gpt2)\n"
        "llama only\n"
        "  --kv-heads N      key/value heads, a divisor of --heads (1: MQA; default --heads: MHA)\n"
        "  --head-dim D      each head's width (default hidden/heads; Mistral Nemo: 128 with hidden 5120,\n"
        "                    32 heads): q and the attention output are heads*D wide\n"
        "  --ffn-hidden N    the SwiGLU MLP's width (default 8h/3 rounded up to a multiple of 64)\n"
        "  --rope-theta X    RoPE base (default 10000); rotate_half pairing (Hugging Face), not interleaved\n"
        "  --rope-scaling S  RoPE frequency scaling: none (default), linear:FACTOR, or Llama 3.1's\n"
        "                    llama3:FACTOR:LOW:HIGH:ORIGINAL_POSITIONS (e.g. llama3:8:1:4:8192), YaRN's\n"
        "                    yarn:FACTOR:ORIGINAL_POSITIONS (Qwen3's 128k: yarn:4:32768), dynamic NTK's\n"
        "                    dynamic:FACTOR:MAX_POSITIONS, or with\n"
        "                    --fused-proj Phi-3's longrope:ORIGINAL_POSITIONS:ATTENTION:SHORT,...:LONG,...;\n"
        "                    a Hugging Face model's rope_scaling comes with --init-from\n"
        "  --norm-eps X      RMSNorm epsilon (default 1e-5)\n"
        "  --tie-embeddings  the output layer is the token embedding (default: its own, lm_head)\n"
        "  --qkv-bias        q, k and v projections carry biases (Qwen2)\n"
        "  --qk-norm         q and k RMS-normalised per head (over head_dim, a weight each) before RoPE\n"
        "                    (Qwen3); not with --qkv-bias\n"
        "  --fused-proj      q|k|v stored as one qkv_proj and gate|up as one gate_up_proj, and LoRA adapts\n"
        "                    them so (Phi-3, Phi-4); not with --qkv-bias or --qk-norm\n"
        "  --sliding-window W\n"
        "                    each query attends to its last W positions only (key j seen by query i iff\n"
        "                    0 <= i - j < W), on every layer, as transformers' sliding_window (Mistral;\n"
        "                    Phi-3-mini-4k's 2047); default: the whole causal prefix\n"
        "  --rotary-dim R    RoPE rotates each head's first R dims (pairs j, j + R/2) and passes the rest\n"
        "                    through: transformers' partial_rotary_factor R/d (Phi-4-mini: 96 of 128); even,\n"
        "                    2 to the head dim (default: all); export --hf writes it with --fused-proj (Phi-3)\n"
        "\n"
        "fine-tuning with LoRA (docs/LORA.md)\n"
        "  --lora-rank R     freeze the base (no gradients, no AdamW state) and train rank-R adapters\n"
        "                    y = W x + (alpha/R)·B(A x), peft's names and initialisation (A Kaiming-uniform, B 0)\n"
        "  --lora-alpha A    the scale's alpha (default 8, peft's)\n"
        "  --lora-targets L  adapted linears: q,k,v,o,gate,up,down (llama), qkv,o,gate_up,down (llama\n"
        "                    --fused-proj: Phi-3), qkv,proj,fc,fc2 (GPT-2); default all\n"
        "  --lora-fa         LoRA-FA: A frozen too, only B trains; the adapted linears keep only x·Aᵀ\n"
        "  --lora-rslora     rank-stabilised LoRA (peft's use_rslora): the scale is alpha/sqrt(r), not alpha/r\n"
        "  --lora-dropout P  peft's lora_dropout: dropout P in [0, 1) on the adapters' input only (default 0)\n"
        "  --base-dtype T    fp32 (default) or bf16: the frozen base stored only in bf16 (2 B per element; its GEMMs\n"
        "                    bf16 with fp32 accumulation; checkpoints store it BF16); the adapters, their\n"
        "                    gradients and AdamW stay fp32\n"
        "\n"
        "optimisation\n"
        "  --steps N         optimizer steps (default 300)\n"
        "  --lr X            peak learning rate (default 1e-3)\n"
        "  --min-lr X        final learning rate of the cosine decay (default lr/10)\n"
        "  --warmup N        linear warmup steps (default min(100, steps/10))\n"
        "  --weight-decay X  AdamW decoupled weight decay on weight matrices and wte (default 0.1)\n"
        "  --clip X          global gradient-norm clip, 0 disables (default 1.0)\n"
        "  --grad-accum N    micro-batches per step (default 1)\n"
        "  --seed N          seed for initialisation, dropout and data order (default 1337)\n"
        "\n"
        "activation memory (docs/MEMORY.md)\n"
        "  --recompute none|selective|full|search   what backward recomputes instead of keeping (default none);\n"
        "                                    search: the fusion-aware search picks each layer's kept set\n"
        "  --act-budget-layer BYTES          search: what one layer may keep (e.g. 30MB); the cheapest recompute\n"
        "                                    of none/selective/full, Tempo's softmax fusion and the norms', GeLU's,\n"
        "                                    (selective) the attention's, q/k/v's, FC1's and the projection's\n"
        "                                    outputs and single dropout masks made again, all exact (with\n"
        "                                    --attention flash: the attention's output is flash's forward again;\n"
        "                                    with --lora-rank the adapters' x·Aᵀ kept, their terms added back)\n"
        "  --search-rates GFLOPS,GBPS[,LINK] search: price recompute at these rates (default: the cached ctron peak\n"
        "                                    and a measured memory bandwidth); LINK: the TP link's GB/s, which prices\n"
        "                                    the collectives a remade GEMM repeats (required with --tp > 1)\n"
        "  --recompute-method uniform|block  full: checkpoint every group of N layers / recompute only the first N\n"
        "  --recompute-num-layers N          N for --recompute-method (default 1)\n"
        "  --recompute-layers LIST           per-layer choice, e.g. 0-3:full,4-11:selective (every layer once;\n"
        "                                    memo layers with --memo ALPHA, or each its own: 0-3:memo@0.25)\n"
        "  --dropout-masks bytes|bits|regen  keep masks as bytes, packed bits, or regenerate them (default bytes)\n"
        "  --precision fp32|bf16             compute precision (default fp32). bf16 is mixed precision: fp32\n"
        "                                    master weights, AdamW state and weight gradients; bf16 GEMMs with\n"
        "                                    fp32 accumulation; fp32 LN/softmax/GeLU/loss; activations kept in bf16\n"
        "  --bf16                            the same as --precision bf16 (Megatron's flag)\n"
        "  --device cpu|cuda[:N]|cpu-guarded where the model runs (default cpu). cuda: the N-th GPU (exit 2\n"
        "                                    when none is visible; plain cuda under mpirun: each rank's local\n"
        "                                    GPU); cpu-guarded: the CPU with device memory unreadable to host\n"
        "                                    code (a check that nothing reads tensors directly). Ranks exchange\n"
        "                                    device tensors through NCCL where built, else via host memory\n"
        "  --act-dtype fp32|bf16             precision of kept activations; with --precision fp32 compute stays\n"
        "                                    fp32 (default: fp32, or bf16 under --precision bf16)\n"
        "  --tempo LIST                      Tempo's in-place gelu, layernorm and fused softmax (dropout),\n"
        "                                    comma-separated, or all (default none)\n"
        "  --attention flash|standard        flash: tiled attention with an online softmax, keeping one\n"
        "                                    log-sum-exp per row instead of the s x s tensors (default standard)\n"
        "  --mini-seq M                      Mini-Sequence: the MLP and the output layer + cross-entropy run in\n"
        "                                    M chunks; no GeLU input/output or logits are kept (default off)\n"
        "  --reversible                      reversible blocks (another model: two residual streams, y1 = x1 +\n"
        "                                    Attn(x2), y2 = x2 + MLP(y1)); backward rebuilds each block's inputs\n"
        "                                    from its outputs, so no layer's activations are kept (docs/MEMORY.md)\n"
        "  --mem-budget BYTES                plan recompute, masks and Tempo for these activation bytes per\n"
        "                                    rank (e.g. 2GiB; see ctron plan) and hold the arena to them\n"
        "  --offload LIST                    keep these per-layer tensors (e.g. fc1_in,gelu_in,fc2_in, or all) in\n"
        "                                    an offload pool, out of the arena, fetched back before backward\n"
        "  --offload-budget BYTES            with --mem-budget: the offload pool may hold this much; the planner\n"
        "                                    then offloads (no FLOPs) before it recomputes\n"
        "  --memo ALPHA                      MEMO: each layer keeps its input; the first ALPHA (0..1) of its\n"
        "                                    positions' other tensors go to host memory (or --offload-dir) and\n"
        "                                    back, the rest are recomputed over that range only; auto with\n"
        "                                    --mem-budget: the planner's α for this machine (rank 0's rates on\n"
        "                                    several ranks); with --tp T but not --sp; with LoRA / LoRA-FA\n"
        "                                    (the adapters run in both ranges, x·Aᵀ kept whole; docs/MEMORY.md)\n"
        "  --tp-link-gbps X                  --memo auto with --tp > 1 (required there): the TP link's GB/s, which\n"
        "                                    prices the attention projection's all-reduce each layer's recompute\n"
        "                                    repeats over its rows\n"
        "  --offload-dir DIR                 the offload pool is a file in DIR (unlinked at once; default: host\n"
        "                                    memory); written and read by an I/O thread overlapped with compute\n"
        "  --static-plan                     record one step's saved tensors and temporaries before training and\n"
        "                                    place every step's at offsets planned from their lifetimes, in one\n"
        "                                    block (reports the plan against the lower bound and the naive sum)\n"
        "  --gelu-bits K                     Few-Bit GeLU: keep a K-bit code (1..4) of the GeLU input and use\n"
        "                                    the optimal piecewise-constant GeLU' in backward (default 0: exact)\n"
        "  --peak-gflops X   peak for MFU/HFU (default: the `ctron peak --precision P` figure of the run's\n"
        "                    precision, measured and cached for 30 days; a step that runs faster raises it)\n"
        "\n"
        "data, evaluation, output\n"
        "  --data FILE       a token file (llm.c format), or text: BPE with --tokenizer, else bytes (default data/kjv.txt)\n"
        "  --tokenizer FILE  a tokenizer.json (ctron tokenize train's, or a Hugging Face model's) for text\n"
        "                    data; saved with checkpoints\n"
        "  --val-data FILE   validation data (same kinds as --data); default: the tail of --data\n"
        "  --val-frac X      tail fraction of --data held out for validation (default 0.1)\n"
        "  --data-order O    random (windows at Philox-drawn offsets, default) or sequential (consecutive windows)\n"
        "  --eval-every N    validation loss every N steps, 0 = only at the end (default 100)\n"
        "  --eval-batches N  validation batches per evaluation (default 8)\n"
        "  --threads N       OpenMP/OpenBLAS threads (default: all cores)\n"
        "  --log FILE        one JSON object per step (step, loss, val_loss, lr, ms, tokens_per_s, act_bytes, ...)\n"
        "  --print-every N   progress line every N steps when stdout is not a terminal (default 1)\n"
        "  --no-ledger       do not print the activation ledger (measured vs predicted) after the first step\n"
        "  --max-bad-steps N a step with a non-finite loss or gradient norm is skipped; stop after N in a row\n"
        "                    with a diagnostic, keeping the last checkpoint (default 5, 0 = never stop)\n"
        "  --sample N        after training, print N sampled tokens (KV-cache generation)\n"
        "  --prompt TEXT     prompt for --sample (default a newline)\n"
        "\n"
        "parallelism (docs/PARALLEL.md; launch with mpirun -np N, N = dp x pp x tp)\n"
        "  --tp T            tensor-parallel size: T consecutive ranks share each layer (heads split) (default 1)\n"
        "  --tp-solo         one process runs TP rank 0 of --tp T alone, the other ranks absent: every TP\n"
        "                    collective counts its bytes and stands in locally, so time and memory are one\n"
        "                    rank's and the numbers are not the model's (timing a rank's shapes on one\n"
        "                    device, e.g. the paper's Table 4; no checkpoints)\n"
        "  --sp              sequence parallelism in the TP group: LN, dropout, residual on s/T rows each\n"
        "  --zero 0|1        1: ZeRO-1, AdamW state sharded over the data-parallel ranks (default 0)\n"
        "  --pp P            pipeline stages: stage r holds a contiguous range of layers (default 1)\n"
        "  --pp-schedule S   1f1b (default), interleaved (with --virtual-stages V), gpipe (all forwards, then all\n"
        "                    backwards) or layered (layered gradient accumulation; layer l on stage l mod P);\n"
        "                    the micro-batches of a step are --grad-accum\n"
        "  --virtual-stages V  interleaved: model chunks per stage (chunk v of stage r starts at v·L/V + r·L/(P·V))\n"
        "  --recompute-microbatches N  of the micro-batches a stage keeps in flight, N keep every activation;\n"
        "                    the others follow --recompute (Megatron's micro-batches with partial checkpoints)\n"
        "\n"
        "checkpoints (docs/CHECKPOINTS.md)\n"
        "  --ckpt-dir DIR    save checkpoints to DIR/step_NNNNNNNN (atomically)\n"
        "  --save-every N    save every N steps; always at the last step (default 0: only at the last)\n"
        "  --keep K          keep the newest K checkpoints, 0 = all (default 3)\n"
        "  --stop-after N    stop after step N of --steps (saving there); resume later with --resume\n"
        "  --resume DIR      continue from the newest checkpoint in DIR (or from a step_ directory) up to\n"
        "                    --steps; flags left out take the checkpoint's values (state.json), given ones\n"
        "                    must agree, or differ with a note where only memory or the layout changes\n"
        "  --init-from PATH  start from a Hugging Face model directory (config.json + safetensors) or a\n"
        "                    ctron checkpoint: its architecture and weights (any layout), its tokenizer.json\n"
        "                    for text data unless --tokenizer is given; shape flags beside it must agree\n"
        "                    (docs/HF.md)\n"
        "  --lora-from DIR   LoRA adapters that start from a peft adapter directory (its r, lora_alpha,\n"
        "                    use_rslora and target_modules are the run's) instead of peft's initialisation\n"
        "  --lora-out DIR    write the final checkpoint's adapters as a peft directory (needs --ckpt-dir)\n"
        "  --list-options    print every option with what --resume does with it, and exit\n"
        "  -h, --help        this text\n");
}

// Three passes (cli/train_passes.h): each flag's type and bounds (with what --resume restores), the
// options against the model and each other, then what the run meets outside: device, machine, files.
int cli_parse_train(int argc, char **argv, TrainOptions *o, int world_size) {
    train_options_default(o);
    o->world_size = world_size;
    TrainGiven given;
    int rc = train_flags_parse(argc, argv, o, &given);
    if (rc == 0) rc = train_init_from(o, &given);   // refuses --resume beside it: before resume's checks
    if (rc == 0) rc = train_flags_resume(o, &given);
    if (rc == 0) rc = train_validate(o, &given);
    if (rc == 0) rc = train_check_environment(o, &given);
    return rc;
}

// Every rank parses the same flags; all must agree that they are good before any rank starts
// (one rank going on alone would wait forever in its first collective). Rank 0 prints the usual
// message; a rank that alone rejects its inputs (say --data missing on its host) prints its own.
static int parse_on_all_ranks(Comm *comm, int argc, char **argv, TrainOptions *o) {
    CommGroup *w = &comm->world;
    int saved = -1;
    if (w->rank != 0) {   // the same message from every rank would be noise
        fflush(stderr);
        saved = dup(fileno(stderr));
        if (!freopen("/dev/null", "w", stderr)) saved = -1;
    }
    int rc = cli_parse_train(argc, argv, o, w->size);   // checks the layout against the world's size too
    if (saved >= 0) { fflush(stderr); dup2(saved, fileno(stderr)); close(saved); }
    float flags[2] = {rc != 0 && rc != -1 ? 1.0f : 0.0f, w->rank == 0 && rc != 0 && rc != -1 ? 1.0f : 0.0f};
    if (w->size > 1) comm_allreduce_sum(w, flags, flags, 2);
    if (flags[0] > 0.0f) {
        if (rc > 0 && w->rank != 0 && flags[1] == 0.0f) {   // only here: say why, once per such rank
            fprintf(stderr, "ctron train (rank %d of %d): ", w->rank, w->size);
            cli_parse_train(argc, argv, o, w->size);
        }
        // No rank exits before every message is out: mpirun ends the job at the first non-zero exit.
        fflush(stderr);
        if (w->size > 1) comm_barrier(w);
        return CTRON_EXIT_USAGE;
    }
    return rc;
}

int cli_train_main(int argc, char **argv) {
    Comm comm;
    char err[256];
    if (comm_init(&comm, COMM_AUTO, &argc, &argv, err, sizeof err) != 0) {
        fprintf(stderr, "ctron train: %s\n", err);
        return 1;
    }
    TrainOptions o;
    RunLocks locks = {-1, -1};
    int rc = parse_on_all_ranks(&comm, argc, argv, &o);
    // --memo auto: every rank plans with rank 0's host link and GEMM rate (all ranks are here, flags agreed)
    if (rc == 0 && comm.world.size > 1 && o.memo_alpha == -2.0) train_memo_agree_speeds(&o, &comm.world);
    if (rc == 0) rc = cli_train_claim(&comm, &o, &locks);   // before any collective of the run
    // Open MPI's mpirun follows its SIGTERM to the ranks with SIGKILL a second later: a preempted run
    // saves only when launched through scripts/ctron-mpirun (docs/RELIABILITY.md).
    if (rc == 0 && comm.world.rank == 0 && comm.world.size > 1 && o.ckpt_dir && getenv("OMPI_COMM_WORLD_SIZE") &&
        !getenv("CTRON_LAUNCHER"))
        fprintf(stderr, "ctron train: note: a SIGTERM to mpirun reaches the ranks with a SIGKILL one second behind it, "
                "before a step can finish and save; launch with scripts/ctron-mpirun (it turns SIGTERM into "
                "SIGUSR1, which every rank saves on) so that a preemption loses nothing\n");
    if (rc == 0) rc = train_run(&o, &comm);
    if (rc == 0 && comm.world.rank == 0 && o.lora_out) rc = cli_train_lora_out(&o);
    if (rc > 0 && comm.world.rank == 0) cli_train_unmake(&o, &locks);
    cli_train_release(&locks);
    comm_finalize(&comm);
    return rc == -1 ? 0 : rc;
}
