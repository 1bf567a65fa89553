#!/usr/bin/env python3
# Makes the Hugging Face fixtures that ../shared/fixtures does not cover, with
# the real libraries (transformers, tokenizers, safetensors, torch), on a
# machine that has them (the project's lent GPU machine; no network needed):
#
#   models/qwen2-tiny-bf16/      Qwen2ForCausalLM: QKV biases, tied head, stored in BF16,
#                                Qwen2 Split pre-tokenizer (trained here), NFC
#   models/mistral-tiny-f16/     MistralForCausalLM: GQA 4:1, untied, stored in F16, config in
#                                the older spelling (rope_theta, torch_dtype at top level),
#                                Llama 3 Split pre-tokenizer with a BOS template
#   models/llama-tiny-sharded/   LlamaForCausalLM in f32, saved in 3 shards with
#                                model.safetensors.index.json
#   models/gpt2-noprefix-tiny/   GPT2LMHeadModel saved as the Hub's openai-community/gpt2 is:
#                                tensor names without "transformer.", no lm_head (tied)
#   tokenizers/qwen2-bpe-512/, llama3-bpe-512/ and their *-cases.json (ids from `tokenizers`)
#   tokenizers/refused-{metaspace-bpe,unigram,wordpiece}/tokenizer.json: must be refused
#   split-check.json: the `tokenizers` library's ids for the hand-derived Split cases
#
# Each model folder gets reference.json in the format of ../shared/fixtures (see
# tests/data/hf/README.md): for every prompt, input_ids, greedy_ids (24 greedy steps of the
# stored weights widened to f32, on the CPU, one step at a time, cross-checked with
# generate()), top2_margin, first_step_top10, greedy_text.
#
# Models are trained briefly (on the GPU when there is one) on this repository's text so
# that their next-token distributions are peaked. Sizes are kept small (vocabulary 512,
# width 64) so that the whole set stays under 2 MB in the repository.
#
#   python3 tests/data/hf/make-model-fixtures.py --repo . --out /tmp/fixtures
import argparse, glob, json, os, shutil, sys

import torch
import tokenizers
import transformers
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, Regex, decoders, models, normalizers, pre_tokenizers, processors, trainers

QWEN2 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
LLAMA3 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
PROMPTS = [
    "The secret of",
    "A computer is",
    "Q: What do you call",
    "Never trust a man who",
    "It was a dark and stormy night; the rain fell in torrents, except at occasional intervals",
    "Unicode: café, naïve, 東京, emoji 🙂 and  two  spaces\n\nnew paragraph",
    "In 1984, 42 programmers wrote 1,000,000 lines of code; it didn't work.",
]
VOCAB = 512
STEPS = 800


def corpus_lines(repo):
    files = sorted(glob.glob(os.path.join(repo, "docs", "*.md")))
    files.append(os.path.join(repo, "tests", "data", "train-corpus.txt"))
    files.append(os.path.join(repo, "README.md"))
    lines = []
    for f in files:
        with open(f, encoding="utf-8") as fh:
            lines += [l for l in fh.read().split("\n") if l.strip()]
    return lines


def bpe_tokenizer(lines, pattern, specials, bos=None):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(lines, trainer)
    if bos is None:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    else:
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                          special_tokens=[(bos, tok.token_to_id(bos))])])
    return tok


def write_tokenizer(tok, folder, bos, eos):
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": bos,
                   "eos_token": eos, "model_max_length": 256}, f, indent=1)


def cases(tok, texts):
    return {"made_with": f"tokenizers {tokenizers.__version__}",
            "cases": [{"text": t, "ids": tok.encode(t).ids} for t in texts]}


def train(model, tok, lines, device, seq=64, batch=32):
    ids = []
    for l in lines:
        ids += tok.encode(l + "\n").ids
    data = torch.tensor(ids, dtype=torch.long)
    g = torch.Generator().manual_seed(7)
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    for step in range(STEPS):
        starts = torch.randint(0, len(data) - seq - 1, (batch,), generator=g)
        x = torch.stack([data[s:s + seq] for s in starts]).to(device)
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 200 == 0 or step == STEPS - 1:
            print(f"  step {step} loss {loss.item():.3f}", flush=True)
    model.to("cpu").eval()


@torch.no_grad()
def reference(folder, tok, name, stored):
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                                              attn_implementation="eager").eval()
    prompts = []
    for text in PROMPTS:
        input_ids = tok.encode(text).ids
        ids = list(input_ids)
        greedy, margins, top10 = [], [], None
        for _ in range(24):
            logits = model(input_ids=torch.tensor([ids])).logits[0, -1].float()
            top = torch.topk(logits, 10)
            if top10 is None:
                top10 = [[int(i), float(v)] for v, i in zip(top.values, top.indices)]
            margins.append(float(top.values[0] - top.values[1]))
            greedy.append(int(top.indices[0]))
            ids.append(greedy[-1])
        gen = model.generate(torch.tensor([input_ids]), max_new_tokens=24, do_sample=False,
                             pad_token_id=0)[0, len(input_ids):].tolist()
        prompts.append({"text": text, "input_ids": input_ids, "greedy_ids": greedy,
                        "generate_agrees": gen == greedy, "top2_margin": margins,
                        "first_step_top10": top10, "greedy_text": tok.decode(greedy)})
    with open(os.path.join(folder, "reference.json"), "w") as f:
        json.dump({"model": name, "transformers": transformers.__version__,
                   "torch": torch.__version__, "dtype_stored": stored, "prompts": prompts}, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", default=".")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(1234)
    lines = corpus_lines(args.repo)
    out_models = os.path.join(args.out, "models")
    out_tok = os.path.join(args.out, "tokenizers")
    os.makedirs(out_models, exist_ok=True)
    os.makedirs(out_tok, exist_ok=True)
    with open(os.path.join(args.repo, "tests/data/hf/tokenizers/gpt2-cases.json")) as f:
        texts = [c["text"] for c in json.load(f)["cases"]]

    # Tokenizers.
    qwen = bpe_tokenizer(lines, QWEN2, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    llama3 = bpe_tokenizer(lines, LLAMA3, ["<|begin_of_text|>", "<|end_of_text|>"],
                           bos="<|begin_of_text|>")
    for tok, name in ((qwen, "qwen2-bpe-512"), (llama3, "llama3-bpe-512")):
        os.makedirs(os.path.join(out_tok, name), exist_ok=True)
        tok.save(os.path.join(out_tok, name, "tokenizer.json"))
        with open(os.path.join(out_tok, name + "-cases.json"), "w") as f:
            json.dump(cases(tok, texts), f, ensure_ascii=False, indent=0)
    refused = {
        "refused-metaspace-bpe": tokenizers.SentencePieceBPETokenizer(),
        "refused-unigram": tokenizers.SentencePieceUnigramTokenizer(),
        "refused-wordpiece": tokenizers.BertWordPieceTokenizer(),
    }
    for name, t in refused.items():
        t.train_from_iterator(lines, vocab_size=300)
        os.makedirs(os.path.join(out_tok, name), exist_ok=True)
        t.save(os.path.join(out_tok, name, "tokenizer.json"))

    # The library's ids for the hand-derived Split cases.
    check = {}
    for cf in sorted(glob.glob(os.path.join(args.repo, "tests/data/hf/tokenizers/*-split-cases.json"))):
        name = os.path.basename(cf)[:-len("-cases.json")]
        # These files mix the two merge spellings on purpose (our reader takes both);
        # the library takes one per file, so it reads a copy with every merge as a pair.
        with open(os.path.join(os.path.dirname(cf), name, "tokenizer.json"), encoding="utf-8") as f:
            tj = json.load(f)
        tj["model"]["merges"] = [m.split(" ", 1) if isinstance(m, str) else m
                                 for m in tj["model"]["merges"]]
        t = Tokenizer.from_str(json.dumps(tj))
        with open(cf) as f:
            cs = json.load(f)["cases"]
        check[name] = [{"text": c["text"], "ids": t.encode(c["text"]).ids,
                        "hand": c["ids"], "agree": t.encode(c["text"]).ids == c["ids"]} for c in cs]
    with open(os.path.join(args.out, "split-check.json"), "w") as f:
        json.dump(check, f, ensure_ascii=False, indent=1)

    # qwen2-tiny-bf16
    folder = os.path.join(out_models, "qwen2-tiny-bf16")
    cfg = transformers.Qwen2Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=176,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=256,
                                   rope_theta=1000000.0, rms_norm_eps=1e-6,
                                   tie_word_embeddings=True, bos_token_id=0, eos_token_id=0)
    print("qwen2-tiny-bf16", flush=True)
    m = transformers.Qwen2ForCausalLM(cfg)
    train(m, qwen, lines, device)
    m.to(torch.bfloat16).save_pretrained(folder)
    write_tokenizer(qwen, folder, "<|endoftext|>", "<|endoftext|>")
    reference(folder, qwen, "qwen2-tiny-bf16", "bfloat16")

    # mistral-tiny-f16, config rewritten in the older spelling.
    folder = os.path.join(out_models, "mistral-tiny-f16")
    bos = llama3.token_to_id("<|begin_of_text|>")
    eos = llama3.token_to_id("<|end_of_text|>")
    cfg = transformers.MistralConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=160,
                                     num_hidden_layers=2, num_attention_heads=4,
                                     num_key_value_heads=1, max_position_embeddings=256,
                                     rope_theta=10000.0, rms_norm_eps=1e-5, sliding_window=4096,
                                     tie_word_embeddings=False, bos_token_id=bos, eos_token_id=eos)
    print("mistral-tiny-f16", flush=True)
    m = transformers.MistralForCausalLM(cfg)
    train(m, llama3, lines, device)
    m.to(torch.float16).save_pretrained(folder)
    write_tokenizer(llama3, folder, "<|begin_of_text|>", "<|end_of_text|>")
    path = os.path.join(folder, "config.json")
    with open(path) as f:
        c = json.load(f)
    rp = c.pop("rope_parameters", None) or {}
    c["rope_theta"] = rp.get("rope_theta", 10000.0)
    c["torch_dtype"] = c.pop("dtype", "float16")
    with open(path, "w") as f:
        json.dump(c, f, indent=2)
    reference(folder, llama3, "mistral-tiny-f16", "float16")

    # llama-tiny-sharded
    folder = os.path.join(out_models, "llama-tiny-sharded")
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=172,
                                   num_hidden_layers=3, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=256,
                                   rope_theta=10000.0, rms_norm_eps=1e-5,
                                   tie_word_embeddings=False, bos_token_id=0, eos_token_id=0)
    print("llama-tiny-sharded", flush=True)
    m = transformers.LlamaForCausalLM(cfg)
    train(m, qwen, lines, device)
    m.save_pretrained(folder, max_shard_size="300KB")
    write_tokenizer(qwen, folder, "<|endoftext|>", "<|endoftext|>")
    reference(folder, qwen, "llama-tiny-sharded", "float32")

    # gpt2-noprefix-tiny: GPT-2 as the Hub's gpt2 repo stores it.
    folder = os.path.join(out_models, "gpt2-noprefix-tiny")
    gpt2_tok = bpe_tokenizer(lines, r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
                             ["<|endoftext|>"])
    cfg = transformers.GPT2Config(vocab_size=VOCAB, n_positions=256, n_embd=64, n_layer=2,
                                  n_head=4, bos_token_id=0, eos_token_id=0)
    print("gpt2-noprefix-tiny", flush=True)
    m = transformers.GPT2LMHeadModel(cfg)
    train(m, gpt2_tok, lines, device)
    m.save_pretrained(folder)
    write_tokenizer(gpt2_tok, folder, "<|endoftext|>", "<|endoftext|>")
    reference(folder, gpt2_tok, "gpt2-noprefix-tiny", "float32")  # before renaming: same weights
    st = os.path.join(folder, "model.safetensors")
    tensors = load_file(st)
    renamed = {k[len("transformer."):] if k.startswith("transformer.") else k: v.contiguous()
               for k, v in tensors.items() if k != "lm_head.weight"}
    save_file(renamed, st, metadata={"format": "pt"})
    # transformers loads the renamed file to the same logits (its prefix and tying rules).
    with torch.no_grad():
        again = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        x = torch.tensor([gpt2_tok.encode(PROMPTS[0]).ids])
        same = torch.equal(again(input_ids=x).logits, m(input_ids=x).logits)
    print(f"  renamed gpt2 loads to the same logits: {same}", flush=True)
    assert same

    with open(os.path.join(args.out, "versions.json"), "w") as f:
        json.dump({"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                   "torch": torch.__version__, "device": device}, f)
    print("done", flush=True)


if __name__ == "__main__":
    main()
