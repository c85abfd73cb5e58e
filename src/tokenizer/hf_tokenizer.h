// Hugging Face's tokenizer.json (the `tokenizers` library's serialisation), BPE: byte-level (a
// ByteLevel pre-tokenizer step) or SentencePiece-style (none: the model works on characters).
//   model            {"type":"BPE","vocab":{str:id},"merges":["a b",...] or [["a","b"],...],
//                     "unk_token","fuse_unk","ignore_merges","byte_fallback","dropout",...}
//   added_tokens     [{"id","content","single_word","lstrip","rstrip","normalized","special"}]
//   normalizer       null, Prepend, Replace (a String pattern), NFC/NFD/NFKC/NFKD, or a Sequence
//   pre_tokenizer    ByteLevel, or Split(s) followed by one ByteLevel (a Sequence): Llama 3's form;
//                    without ByteLevel: null (Llama 2's legacy form), Metaspace, Split(s)
//   post_processor   null, ByteLevel, TemplateProcessing, RobertaProcessing, BertProcessing or a
//                    Sequence of them: the ids it puts around a single sequence
//   decoder          byte-level: null or ByteLevel; SentencePiece-style: Replace, ByteFallback,
//                    Fuse, Strip, Metaspace or a Sequence of them (tokenizer/decoders.h)
// truncation and padding are ignored (ctron encodes whole documents). Anything else is refused
// with a message naming the file and the field (docs/TOKENIZER.md).
#ifndef CTRON_HF_TOKENIZER_H
#define CTRON_HF_TOKENIZER_H
#include <cjson/cJSON.h>
#include <stddef.h>
#include "tokenizer/bpe.h"

// Builds bpe from a parsed tokenizer.json (root, read from path: used in messages). Returns 0, or
// -1 with a message in err (bpe is then empty).
int hf_tokenizer_read(Bpe *bpe, const cJSON *root, const char *path, char *err, size_t errlen);

// The tokenizer.json text of a tokenizer that bpe_train made (a fresh string, cJSON_free it), or
// NULL with a message in err for one it cannot express.
char *hf_tokenizer_write(const Bpe *bpe, char *err, size_t errlen);
#endif
