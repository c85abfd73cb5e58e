#!/usr/bin/env python3
"""ctron's tokenizer against Hugging Face's `tokenizers` (issue 26 item 3), offline.

usage: tokenizer_parity.py CTRON KJV WORKDIR

Eight tokenizer.json files, each encoded by both sides (`tokenizers` with Tokenizer.encode(text),
add_special_tokens=True; ctron with `ctron tokenize encode`) and compared id for id:
  gpt2     trained here by `tokenizers` (BpeTrainer on the KJV): GPT-2's ByteLevel pre-tokenizer and
           decoder, <|endoftext|>, and added tokens with lstrip/rstrip, single_word and normalized;
  llama3   trained here by `tokenizers` the way Llama 3's file is made: Split with Llama 3's pattern
           then ByteLevel(use_regex=False), ignore_merges, a TemplateProcessing BOS, reserved special
           tokens; every id then moved up by 70,000 so that the vocabulary (72,3xx) needs uint32
           token files on ctron's side;
  ctron    written by `ctron tokenize train` (with --special <|endoftext|>) and read by `tokenizers`
           (the KJV's first megabyte for this one and the ones below);
  llama2   SentencePiece-style, from a BPE model that sentencepiece trains as Llama 2's was (byte
           fallback), written the way transformers' LlamaConverter does: the legacy form (Prepend +
           Replace normalizer) and the Metaspace form (prepend_scheme first); a normalized and a
           single_word added token besides <unk> <s> </s>;
  spbpe    tokenizers' SentencePiece-style BPE: NFKC, Metaspace with split, unk without byte fallback;
  qwen2    Qwen2's pipeline: NFC, Split with its pattern, ByteLevel;
  phi4     Phi-4-mini's (GPT-4o's o200k_base pattern: letters split by case, marks, contractions attached),
           Split then ByteLevel, ids moved up past 197,000 as in its 200,064-token vocabulary.
The tokenizers learn from the KJV and 3,000 random documents (below). The texts: the whole KJV; hand-picked adversarial documents (emoji, CJK, combining marks, numbers,
whitespace runs, contractions, very long words, special tokens in the text, Unicode spaces) and 400
random documents drawn from the same characters, as JSONL (one document per line); NUL bytes as a
text file; invalid UTF-8: `tokenizers` takes only str, so Python replaces each invalid sequence with
U+FFFD first (decode(errors="replace")) and ctron must give the same ids on those bytes, while on the
raw bytes ctron must give back exactly the input. Decoding: ctron's bytes, read as UTF-8 with
replacement, equal tokenizers' decode() with and without skip_special_tokens.
Prints the figures; exits 1 on the first disagreement, naming the document and the position.
"""
import json
import os
import random
import struct
import subprocess
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
          r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
         r"\s+(?!\S)|\s+")
# Phi-4-mini's (GPT-4o's, tiktoken's o200k_base): letters split by case, contractions attached, "/" after
# punctuation, numbers in threes.
O200K = "|".join([
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}", r" ?[^\s\p{L}\p{N}]+[\r\n/]*", r"\s*[\r\n]+", r"\s+(?!\S)", r"\s+"])
SHIFT = 70000   # the llama3 file's ids start here: a vocabulary above 65,536
PHI4_SHIFT = 197000   # the phi4 file's: ids up to Phi-4-mini's 200,064


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def read_tokens(path):
    d = open(path, "rb").read()
    magic, version, n = struct.unpack("<3i", d[:12])
    fmt = {(20240520, 1): "H", (20240801, 7): "I"}.get((magic, version))
    if fmt is None:
        fail(f"{path}: header {magic} {version}")
    ids = list(struct.unpack(f"<{n}{fmt}", d[1024:]))
    return ids, 2 if fmt == "H" else 4


def ctron(*args):
    r = subprocess.run([CTRON, "tokenize", *args], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"ctron tokenize {' '.join(args)}: rc {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def ctron_encode(tok_json, path, name):
    out = os.path.join(WORK, name + ".bin")
    ctron("encode", "--tokenizer", tok_json, "--in", path, "--out", out)
    return read_tokens(out)


def ctron_decode(tok_json, ids_path, skip):
    out = ids_path + ".out"
    ctron("decode", "--tokenizer", tok_json, "--in", ids_path, "--out", out, *(["--skip-special"] if skip else []))
    return open(out, "rb").read()


def compare(what, want, got):
    if want == got:
        return
    i = next((i for i in range(min(len(want), len(got))) if want[i] != got[i]), min(len(want), len(got)))
    fail(f"{what}: {len(want)} ids from tokenizers, {len(got)} from ctron; first difference at {i}: "
         f"tokenizers {want[max(0, i - 3):i + 4]}, ctron {got[max(0, i - 3):i + 4]}")


# ---- the texts ---------------------------------------------------------------------------------------

POOL = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") * 3 +
        list(" " * 12 + "\n" * 4 + "\t\r.,;:!?'\"()-_/*&%$#@[]{}<>|~`^+=\\") +
        list("éßçñøåЖжλΩΣ中文日本語한국어ابتث١٢٣٤—’“”…€£¥§¶°±²³ⅧⅨ𝔘𝟘ſİKﬁ") +
        ["\u0301", "\u0308", "\u0323", "\u200d", "\u200b", "\u00a0", "\u3000", "\u2028", "\u0085", "\u180e",
         "\ufeff", "\u2009", "\U0001F44B", "\U0001F3FD", "\U0001F1FA\U0001F1F8", "\U0001F600", "'s", "'T", "'re",
         "'LL", "'d", " 12345", "IT'S"])
SPECIAL_IN_TEXT = ["<|endoftext|>", "<mask>", " <mask> ", "<sw>", "a<sw>b", " hello world",
                   "<|begin_of_text|>", "<|reserved_special_token_3|>", "<s>", "</s>x", " <|user|> ", "<|user|>"]

FIXED = [
    "", " ", "a", "Hello world", "  double", "\r\nA", "x\r\n y", "\n   indented", "\r\n\r\n", "end   ",
    "Hello 👋🏽 world 🇺🇸 👨‍👩‍👧‍👦 family! 😀😀😀",
    "中文字符测试，日本語のテキスト。한국어 텍스트와 漢字",
    "e\u0301 n\u0303 a\u0308\u0301\u0323 Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319 ◌̰",
    "1234567 3.14159 1,000,000 ١٢٣٤٥ ⅧⅨ ²³ 0x1F 2024-11-25 +44 (0)20 7946 0958",
    "a  b   c\t\t d\n\n\ne \r\n f\u00a0g\u3000h\u2028i \u180e j\u0085k\ufeffl   ",
    "don't I'M you're they've IT'S we'll he'd she'S I'ſ O'Neil rock'n'roll ''s",
    "a" * 5000 + " " + "ab" * 2500 + " " + "Donaudampfschifffahrtsgesellschaftskapitän" * 40,
    "Hello!!!\n\n\nWorld?!\r\n...---***\n",
    "Привет, мир! Γειά σου Κόσμε! مرحبا بالعالم! नमस्ते दुनिया! สวัสดีชาวโลก",
    "<|endoftext|>In the beginning<|endoftext|><|endoftext|> God<mask>created <mask> the <sw> heaven<sw>",
    "<|begin_of_text|>x<|reserved_special_token_3|> hello world hello worlds",
    "\t\tindented code:\n    if (x) { return y; }\n",
    "<s>Hello</s> <s> [INST] hi [/INST]</s>", "  <s>  x", "<|user|>a <|user|> b<|user|>",
    "ｆｕｌｌｗｉｄｔｈ ﬁ ｶﾀｶﾅ ① ㎏ Å Å e\u0301\u0323 \u1e0b\u0323 \u0958 한\u1100\u1161",
]


def random_docs(seed, n_docs):
    rnd = random.Random(seed)
    docs = []
    for _ in range(n_docs):
        n = rnd.randint(0, 60)
        parts = [rnd.choice(POOL) for _ in range(n)]
        if rnd.random() < 0.2:
            parts.insert(rnd.randint(0, len(parts)), rnd.choice(SPECIAL_IN_TEXT))
        docs.append("".join(parts))
    return docs


def adversarial_docs():
    return FIXED + random_docs(2611, 400)


NUL_TEXT = "a\0b\0\0 c\0\n\0 \0d NUL\0s"
BAD_UTF8 = (b"abc\xff\xfe def \xc3\x28 \xe2\x82 ok \xed\xa0\x80 surrogate \xf4\x90\x80\x80 \xc0\xaf overlong "
            b"\x80\x80 caf\xc3\xa9 end\xf0\x9f\x98")

# ---- the tokenizers ----------------------------------------------------------------------------------


def train_gpt2(corpus):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tr = trainers.BpeTrainer(vocab_size=3000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=["<|endoftext|>"], show_progress=False)
    tok.train_from_iterator(corpus, trainer=tr)
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=True, special=True, normalized=False)])
    tok.add_tokens([AddedToken("<sw>", single_word=True, normalized=False),
                    AddedToken(" hello world", normalized=True)])
    return tok


def shifted_ids(tok, shift):
    """tok's tokenizer.json as a dict, every id (the model's vocabulary and the added tokens) moved up by shift."""
    t = json.loads(tok.to_str())
    t["model"]["vocab"] = {s: i + shift for s, i in t["model"]["vocab"].items()}
    for a in t["added_tokens"]:
        a["id"] += shift
    return t


def train_llama3(corpus):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>"] + [f"<|reserved_special_token_{i}|>" for i in range(8)]
    tr = trainers.BpeTrainer(vocab_size=2300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=specials, show_progress=False)
    tok.train_from_iterator(corpus, trainer=tr)
    # Move every id up by SHIFT (a vocabulary past uint16), then add Llama 3's BOS template.
    t = shifted_ids(tok, SHIFT)
    bos = t["model"]["vocab"]["<|begin_of_text|>"]
    t["post_processor"] = {
        "type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                      {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
             "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [bos], "tokens": ["<|begin_of_text|>"]}}}]}
    return Tokenizer.from_str(json.dumps(t))


def train_phi4(corpus):
    """Phi-4-mini's pipeline (its tokenizer.json, converted from tiktoken's o200k_base): Split with the o200k
    pattern, ByteLevel without its regex, BPE with its merges applied to whole words too (ignore_merges
    false), its chat special tokens; ids moved up to Phi-4-mini's range."""
    tok = Tokenizer(models.BPE(ignore_merges=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(O200K), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|tool|>"]
    tr = trainers.BpeTrainer(vocab_size=2300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=specials, show_progress=False)
    tok.train_from_iterator(corpus, trainer=tr)
    return Tokenizer.from_str(json.dumps(shifted_ids(tok, PHI4_SHIFT)))


def train_spm(corpus_path):
    """A SentencePiece BPE model trained as Llama 2's was (byte_fallback, identity normalization, a dummy
    prefix, digits split, whitespace-only pieces), made into tokenizer.json the way transformers'
    LlamaConverter does: the model's pieces as the vocabulary, merges from them (generate_merges)."""
    import sentencepiece as spm
    from transformers.convert_slow_tokenizer import generate_merges
    prefix = os.path.join(WORK, "spm")
    # Every sentence, one thread: the same vocabulary every run (its sampling and threads vary it).
    spm.SentencePieceTrainer.train(
        input=corpus_path, model_prefix=prefix, model_type="bpe", vocab_size=3000, byte_fallback=True,
        character_coverage=0.9995, input_sentence_size=0, shuffle_input_sentence=False, num_threads=1,
        split_digits=True, allow_whitespace_only_pieces=True, normalization_rule_name="identity",
        add_dummy_prefix=True, remove_extra_whitespaces=False, unk_id=0, bos_id=1, eos_id=2, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    return vocab, generate_merges(vocab)


def llama2_style(vocab, merges, legacy):
    """Llama 2 / Mistral / TinyLlama's tokenizer.json: legacy (normalizer Prepend "▁" + Replace " " -> "▁",
    no pre-tokenizer) or not (Metaspace, prepend_scheme "first", no split: transformers 5's LlamaTokenizer);
    BPE with byte_fallback and fuse_unk; <s> template; the decoder chain Replace, ByteFallback, Fuse, Strip.
    Two added tokens beyond the specials: a normalized one (matched in the normalized text) and a
    single_word one."""
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    if legacy:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in ("<unk>", "<s>", "</s>")])
    tok.add_tokens([AddedToken("<|user|>", normalized=True), AddedToken("<sw>", single_word=True, normalized=False)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return tok


def train_metaspace_split(corpus):
    """tokenizers' own SentencePiece-style BPE (its SentencePieceBPETokenizer): NFKC, Metaspace with
    split and prepend_scheme "always", the Metaspace decoder, no byte fallback: characters outside a
    limited alphabet become <unk> (not fused)."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=False))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tr = trainers.BpeTrainer(vocab_size=2500, special_tokens=["<unk>"], limit_alphabet=60, show_progress=False)
    tok.train_from_iterator(corpus, trainer=tr)
    return tok


def train_qwen2(corpus):
    """Qwen2's pipeline: NFC, Split with Qwen2's pattern, ByteLevel without its regex."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=2300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], show_progress=False)
    tok.train_from_iterator(corpus, trainer=tr)
    return tok


# ---- the checks --------------------------------------------------------------------------------------


def check(name, tok_json, hf, kjv_path, kjv, docs_path, docs, figures, chars=False):
    """chars: a SentencePiece-style tokenizer, whose decoder ctron runs itself: its text must equal
    tokenizers' decode byte for byte, and raw invalid UTF-8 decodes as tokenizers decodes the same ids
    (its byte tokens give U+FFFD per invalid byte) instead of back to the raw bytes."""
    want = hf.encode(kjv).ids
    got, width = ctron_encode(tok_json, kjv_path, name + "_kjv")
    compare(f"{name}: KJV", want, got)
    # The documents: one JSONL run on ctron's side, each encoded alone on tokenizers'.
    want_docs = [hf.encode(d).ids for d in docs]
    got_all, _ = ctron_encode(tok_json, docs_path, name + "_docs")
    at = 0
    for k, w in enumerate(want_docs):
        compare(f"{name}: document {k} {docs[k][:60]!r}", w, got_all[at:at + len(w)])
        at += len(w)
    if at != len(got_all):
        fail(f"{name}: ctron gave {len(got_all)} ids for the documents, tokenizers {at}")
    flat = [i for w in want_docs for i in w]
    for skip in (False, True):
        raw = ctron_decode(tok_json, os.path.join(WORK, name + "_docs.bin"), skip)
        want = hf.decode(flat, skip_special_tokens=skip)
        if (raw != want.encode()) if chars else (raw.decode("utf-8", "replace") != want):
            fail(f"{name}: decode (skip_special_tokens={skip}) differs")
    nul_path = os.path.join(WORK, "nul.txt")
    compare(f"{name}: NUL bytes", hf.encode(NUL_TEXT).ids, ctron_encode(tok_json, nul_path, name + "_nul")[0])
    # Invalid UTF-8: tokenizers sees the U+FFFD text; ctron the same bytes gives the same ids, and
    # the raw bytes decode back to themselves.
    repl = BAD_UTF8.decode("utf-8", "replace")
    repl_path = os.path.join(WORK, "bad_replaced.txt")
    compare(f"{name}: invalid UTF-8 after replacement", hf.encode(repl).ids,
            ctron_encode(tok_json, repl_path, name + "_repl")[0])
    raw_ids, _ = ctron_encode(tok_json, os.path.join(WORK, "bad.txt"), name + "_bad")
    back = ctron_decode(tok_json, os.path.join(WORK, name + "_bad.bin"), False)
    if back != (hf.decode(raw_ids, skip_special_tokens=False).encode() if chars else special_prefix(hf, BAD_UTF8)):
        fail(f"{name}: invalid UTF-8 does not decode " + ("as tokenizers decodes its ids" if chars else "back to its bytes"))
    n_docs_ids = len(got_all)
    figures.append(f"{name}: vocabulary {hf.get_vocab_size(True)} (max id {max(hf.get_vocab().values())}, "
                   f"uint{8 * width} token files): KJV text {len(got)} ids identical; {len(docs)} documents "
                   f"{n_docs_ids} ids identical; NUL and U+FFFD texts identical; decode identical; "
                   f"raw invalid UTF-8 {len(raw_ids)} ids " + ("decoded as tokenizers does" if chars else "round-trip"))


def special_prefix(hf, raw):
    """What ctron's decode gives for raw bytes: the BOS text the template adds, then the bytes."""
    ids = hf.encode("").ids
    return "".join(hf.decode([i], skip_special_tokens=False) for i in ids).encode() + raw


def main(argv):
    global CTRON, WORK
    if len(argv) != 4:
        print(__doc__)
        return 2
    CTRON, kjv_path, WORK = argv[1], argv[2], argv[3]
    os.makedirs(WORK, exist_ok=True)
    kjv = open(kjv_path, encoding="utf-8").read()
    docs = adversarial_docs()
    # The tokenizers learn from the KJV and from other random documents of the same characters, so
    # that they hold merges of non-ASCII text and of whitespace mixes (where a pre-tokenizer that cut
    # differently would change the ids).
    corpus = kjv.splitlines(True) + [d + "\n" for d in random_docs(7, 3000)]
    corpus_path = os.path.join(WORK, "corpus.txt")
    open(corpus_path, "w", encoding="utf-8").write("".join(corpus))
    docs_path = os.path.join(WORK, "docs.jsonl")
    with open(docs_path, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"text": d}) + "\n")
    open(os.path.join(WORK, "nul.txt"), "w", encoding="utf-8").write(NUL_TEXT)
    open(os.path.join(WORK, "bad.txt"), "wb").write(BAD_UTF8)
    open(os.path.join(WORK, "bad_replaced.txt"), "w", encoding="utf-8").write(BAD_UTF8.decode("utf-8", "replace"))

    figures = []
    gpt2 = train_gpt2(corpus)
    gpt2_json = os.path.join(WORK, "gpt2.json")
    gpt2.save(gpt2_json)
    check("gpt2 (tokenizers-trained)", gpt2_json, gpt2, kjv_path, kjv, docs_path, docs, figures)

    llama3 = train_llama3(corpus)
    llama3_json = os.path.join(WORK, "llama3.json")
    llama3.save(llama3_json)
    check("llama3 (tokenizers-trained, ids + 70000)", llama3_json, llama3, kjv_path, kjv, docs_path, docs, figures)

    # The file ctron writes, in tokenizers: the KJV's first megabyte is enough to show it reads it
    # right (the whole KJV took two thirds of this test's time, 6 s per tokenizer).
    ours = os.path.join(WORK, "ctron.json")
    ctron("train", "--vocab", "3000", "--special", "<|endoftext|>", "--in", corpus_path, "--out", ours)
    head = kjv[:kjv.index("\n", 1 << 20) + 1]
    head_path = os.path.join(WORK, "kjv_head.txt")
    open(head_path, "w", encoding="utf-8").write(head)
    check("ctron-written (read by tokenizers; KJV's first MB)", ours, Tokenizer.from_file(ours), head_path, head,
          docs_path, docs, figures)

    # SentencePiece-style files (Llama 2, Mistral): the KJV's first megabyte, which the legacy form
    # encodes as one word (no pre-tokenizer), as tokenizers does.
    vocab, merges = train_spm(corpus_path)
    for legacy, label in ((True, "llama2 legacy (SentencePiece-trained; Prepend + Replace normalizer)"),
                          (False, "llama2 or mistral (Metaspace prepend_scheme first)")):
        tok = llama2_style(vocab, merges, legacy)
        path = os.path.join(WORK, f"llama2_{'legacy' if legacy else 'metaspace'}.json")
        tok.save(path)
        check(label, path, Tokenizer.from_file(path), head_path, head, docs_path, docs, figures, chars=True)
    meta = train_metaspace_split(corpus)
    meta_json = os.path.join(WORK, "metaspace_split.json")
    meta.save(meta_json)
    check("SentencePieceBPE (NFKC, Metaspace split, unk)", meta_json, Tokenizer.from_file(meta_json), head_path, head,
          docs_path, docs, figures, chars=True)
    qwen2 = train_qwen2(corpus)
    qwen2_json = os.path.join(WORK, "qwen2.json")
    qwen2.save(qwen2_json)
    check("qwen2 (NFC, Split, ByteLevel)", qwen2_json, Tokenizer.from_file(qwen2_json), head_path, head, docs_path,
          docs, figures)

    phi4 = train_phi4(corpus)
    phi4_json = os.path.join(WORK, "phi4.json")
    phi4.save(phi4_json)
    check(f"phi4-mini (o200k Split, ByteLevel; ids + {PHI4_SHIFT})", phi4_json, Tokenizer.from_file(phi4_json),
          head_path, head, docs_path, docs, figures)

    for line in figures:
        print(line)
    print("tokenizer parity: all ids identical")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
