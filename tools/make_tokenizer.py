#!/usr/bin/env python3
"""make_tokenizer.py - writes a small Kimi-style tokenizer for the demo model.

    python3 tools/make_tokenizer.py OUTDIR [--merges N] [--extra-token TEXT]...
    python3 tools/make_tokenizer.py OUTDIR --all-pairs SEED
    python3 tools/make_tokenizer.py OUTDIR --merges N --corpus-list LIST

OUTDIR gets tiktoken.model and tokenizer_config.json in the release's formats
(MODEL.md §5.1, §5.2), so k3_tok_load and the tiktoken oracle read them as they
read the release's:

  * tiktoken.model: the 256 single bytes, then N merges learned by byte-level
    BPE over the sample text below, one "base64 rank" per line. As in the
    release, single bytes do not rank by value: printable bytes come first
    (the GPT-2 byte order), so a loader that assumes rank == byte fails here.
    --extra-token adds TEXT as one more token without the merges that would
    build it, for tests: BPE cannot reach such a token, so it shows whether
    an encoder applies tiktoken's whole-piece rule (with the release's
    vocabulary BPE reproduces every token, so the rule changes nothing).
    --all-pairs replaces the learned merges with all 65,536 two-byte tokens
    in a seeded random order, also for tests: BPE then pairs up each
    piece's bytes in an order that depends on where the piece starts and
    ends, so the ids show the pre-tokeniser's cuts, which a natural
    vocabulary mostly hides (most pieces split into the same tokens whether
    or not they were cut at a given place).
    --corpus-list learns the merges from the UTF-8 text files named in LIST
    (one path per line) instead of the sample text, for a trained model
    (tools/train_nano.py). Its words come from a pattern close to the
    release's pre-tokeniser (MODEL.md section 5.4; letters, cases and
    numbers as Python's re sees them, no Han rule), so merges stay inside
    the pieces the encoder will cut; pair counts are kept up to date
    incrementally, so a corpus of megabytes trains in a minute or so. The
    choice of each merge is the sample mode's: most frequent pair, ties by
    the pair's bytes, skipping pairs that spell an existing token.
  * tokenizer_config.json: added_tokens_decoder names the release's special
    tokens at the release's offsets from the start of the special range
    ([BOS] at +0, [EOS] +1, <|end_of_msg|> +2, ...); the rest of the 256 ids
    are reserved. Vocabulary = ranks + 256.

Standard library only, deterministic (ties break on the pair's bytes), and
independent of the release files.
"""
import argparse
import base64
import collections
import json
import os
import random
import re

# Special tokens of the release: (offset from the first special id, name,
# the "special" flag of added_tokens_decoder).
SPECIALS = [
    (0, "[BOS]", True), (1, "[EOS]", True), (2, "<|end_of_msg|>", True),
    (3, "<|open|>", False), (4, "<|close|>", False), (5, "<|sep|>", False),
    (6, "[start_header_id]", True), (7, "[end_header_id]", True), (9, "[EOT]", True),
    (18, "<|media_begin|>", True), (19, "<|media_content|>", True),
    (20, "<|media_end|>", True), (21, "<|media_pad|>", True),
    (65, "<osagent_mode>", True), (254, "[UNK]", True), (255, "[PAD]", True),
]
NUM_SPECIAL = 256

SAMPLE = """\
The capital of France is Paris. The capital of Germany is Berlin, and the
capital of Italy is Rome. Paris is known for the Eiffel Tower, the Louvre and
its cafes; Berlin for its history, its museums and its music; Rome for the
Colosseum, the Forum and the Vatican.

Once upon a time there was a little robot who wanted to learn how to write
stories. Every morning it read a book, and every evening it wrote a page. It
wasn't easy: the robot didn't know what a dragon was, and it couldn't decide
whether the princess should rescue the knight or the knight the princess.
"I'll write both," it said. "They'll be different stories, and that's fine."

Questions and answers. What is two plus two? Two plus two is four. What is
the largest planet in the solar system? Jupiter is the largest planet. How
many days are in a year? There are 365 days in a year, and 366 in a leap year.
Who wrote Hamlet? William Shakespeare wrote Hamlet around 1600.

def greet(name):
    return f"Hello, {name}!"

for i in range(10):
    print(greet("world"), i * i)

{"role": "user", "content": "Hello, who are you?"}
{"role": "assistant", "content": "I am a small demo model."}

Le chat dort sur le canapé. Der Hund spielt im Garten. El niño come una
manzana. Il sole splende oggi. O livro está na mesa.
Москва — столица России. Το ελληνικό αλφάβητο έχει είκοσι τέσσερα γράμματα.
北京是中国的首都。我们今天去公园散步吧。東京は日本の首都です。
서울은 대한민국의 수도입니다. مرحبا بالعالم. שלום עולם. नमस्ते दुनिया।
Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 1000 2024 3.14159 1,000,000.

A recipe for bread. Mix flour, water, salt and yeast in a large bowl. Knead
the dough for ten minutes until it is smooth and elastic, then cover it and
let it rise in a warm place for an hour. Shape the loaf, let it rise again,
and bake it in a hot oven for about forty minutes, until the crust is golden
brown and the bottom sounds hollow when you tap it.

The weather today will be mostly sunny with a few clouds in the afternoon.
Temperatures will reach twenty degrees, falling to twelve overnight. Tomorrow
brings rain from the west, heavy at times, with strong winds along the coast.
Travellers should check their routes before setting out.

In mathematics, a prime number is a natural number greater than one that is
not a product of two smaller natural numbers. The first primes are two,
three, five, seven, eleven and thirteen. Every even number greater than two
is conjectured to be the sum of two primes; nobody has proved it yet.

Dear team, thank you for your hard work this quarter. We shipped the new
release on time, fixed more than two hundred bugs, and our users noticed:
support requests went down while sign-ups went up. Let's keep the momentum
going next quarter. Please share your ideas in the planning document.

The train leaves the station at seven o'clock. Passengers travelling to the
north should change at the junction; those going south may stay on board.
Tickets can be bought online, at the machines on the platform, or from the
conductor, who will also answer questions about connections and delays.
"""


def byte_order():
    """The 256 bytes in rank order: printable ones first (GPT-2's order)."""
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    return printable + [b for b in range(256) if b not in printable]


def train(text, merges):
    """Byte-level BPE: returns the learned tokens (bytes) in merge order."""
    # A rough pre-tokenisation, so merges stay inside words as the real
    # pattern's pieces would.
    words = collections.Counter(re.findall(r" ?[^\W\d_]+| ?\d{1,3}| ?[^\s\w]+|\s+", text))
    seqs = {w: [bytes([b]) for b in w.encode("utf-8")] for w in words}
    known = {bytes([b]) for b in range(256)}
    learned = []
    while len(learned) < merges:
        pairs = collections.Counter()
        for w, seq in seqs.items():
            for a, b in zip(seq, seq[1:]):
                pairs[(a, b)] += words[w]
        # Most frequent first, then by bytes; skip pairs that spell an
        # existing token another way (token bytes must be unique).
        best = None
        for pair, count in sorted(pairs.items(), key=lambda kv: (-kv[1], kv[0])):
            if pair[0] + pair[1] not in known:
                best = pair
                break
        if best is None:
            break
        token = best[0] + best[1]
        known.add(token)
        learned.append(token)
        for w, seq in seqs.items():
            out, i = [], 0
            while i < len(seq):
                if i + 1 < len(seq) and (seq[i], seq[i + 1]) == best:
                    out.append(token)
                    i += 2
                else:
                    out.append(seq[i])
                    i += 1
            seqs[w] = out
    return learned


# Letters are [^\W\d_] (Python's idea of \p{L}), numbers \d, upper case
# ASCII A-Z only (other letters count as lower case): alternatives 2-8 of
# MODEL.md section 5.4.
_L = r"[^\W\d_]"
_LOW = r"[^\W\d_A-Z]"
_LEAD = r"(?:[^\r\n\w]|_)?"
_CONTRACTION = r"(?:'[sStTmMdD]|'[rR][eE]|'[vV][eE]|'[lL][lL])?"
CORPUS_PATTERN = re.compile(
    _LEAD + r"[A-Z]*" + _LOW + r"+" + _CONTRACTION + "|"
    + _LEAD + r"[A-Z]+" + _LOW + r"*" + _CONTRACTION + "|"
    + r"\d{1,3}|"
    + r" ?(?:[^\s\w]|_)+[\r\n]*|"
    + r"\s*[\r\n]+|\s+(?!\S)|\s+")


def train_corpus(texts, merges):
    """Byte-level BPE over texts (a list of str) with incremental pair counts:
    the same choice rule as train(), returns the learned tokens in merge order."""
    import heapq
    words = collections.Counter()
    for text in texts:
        words.update(CORPUS_PATTERN.findall(text))
    seqs = [[bytes([b]) for b in w.encode("utf-8")] for w in words]
    freq = [words[w] for w in words]
    pairs = collections.Counter()
    where = collections.defaultdict(set)       # pair -> indices of words holding it
    for i, seq in enumerate(seqs):
        for a, b in zip(seq, seq[1:]):
            pairs[(a, b)] += freq[i]
            where[(a, b)].add(i)
    heap = [(-c, p) for p, c in pairs.items()]
    heapq.heapify(heap)
    known = {bytes([b]) for b in range(256)}
    learned = []
    while len(learned) < merges and heap:
        negc, best = heapq.heappop(heap)
        if pairs.get(best, 0) != -negc or negc == 0:
            continue                            # stale entry: a fresher one is queued
        token = best[0] + best[1]
        if token in known:
            del pairs[best]                     # spells a token another way: never chosen
            continue
        known.add(token)
        learned.append(token)
        touched = set()
        for i in sorted(where.pop(best, ())):
            seq = seqs[i]
            for a, b in zip(seq, seq[1:]):
                pairs[(a, b)] -= freq[i]
                touched.add((a, b))
                where[(a, b)].discard(i)
            out, j = [], 0
            while j < len(seq):
                if j + 1 < len(seq) and (seq[j], seq[j + 1]) == best:
                    out.append(token)
                    j += 2
                else:
                    out.append(seq[j])
                    j += 1
            seqs[i] = out
            for a, b in zip(out, out[1:]):
                pairs[(a, b)] += freq[i]
                touched.add((a, b))
                where[(a, b)].add(i)
        for p in touched:
            c = pairs.get(p, 0)
            if c > 0 and p != best:
                heapq.heappush(heap, (-c, p))
            elif c <= 0:
                pairs.pop(p, None)
        pairs.pop(best, None)
    return learned


def read_corpus(list_path):
    """The texts of the files named in list_path, one path per line."""
    texts = []
    with open(list_path, encoding="utf-8") as f:
        for line in f:
            path = line.rstrip("\n")
            if path:
                with open(path, encoding="utf-8") as g:
                    texts.append(g.read())
    return texts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--merges", type=int, default=1000)
    ap.add_argument("--extra-token", action="append", default=[])
    ap.add_argument("--all-pairs", type=int, metavar="SEED")
    ap.add_argument("--corpus-list", metavar="LIST",
                    help="learn the merges from the files named in LIST (one per line)")
    args = ap.parse_args()
    if args.corpus_list is not None and args.all_pairs is not None:
        ap.error("--corpus-list and --all-pairs exclude each other")

    tokens = [bytes([b]) for b in byte_order()]
    if args.corpus_list is not None:
        learned = train_corpus(read_corpus(args.corpus_list), args.merges)
        if len(learned) < args.merges:
            ap.error("the corpus supports only %d merges, not %d" % (len(learned), args.merges))
        tokens += learned
    elif args.all_pairs is None:
        learned = train(SAMPLE, args.merges)
        if len(learned) < args.merges:
            ap.error("the sample text supports only %d merges, not %d" % (len(learned), args.merges))
        tokens += learned
    else:
        pairs = [bytes([a, b]) for a in range(256) for b in range(256)]
        random.Random(args.all_pairs).shuffle(pairs)
        tokens += pairs
    for text in args.extra_token:
        if text.encode("utf-8") in tokens:
            ap.error("--extra-token %r is already a token" % text)
        tokens.append(text.encode("utf-8"))
    os.makedirs(args.outdir, exist_ok=True)
    with open(os.path.join(args.outdir, "tiktoken.model"), "w", encoding="ascii") as f:
        for rank, tok in enumerate(tokens):
            f.write("%s %d\n" % (base64.b64encode(tok).decode("ascii"), rank))

    first = len(tokens)
    decoder = {}
    for offset, name, special in SPECIALS:
        decoder[str(first + offset)] = {
            "content": name, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": special,
        }
    config = {
        "added_tokens_decoder": decoder,
        "bos_token": "[BOS]",
        "eos_token": "[EOS]",
        "pad_token": "[PAD]",
        "unk_token": "[UNK]",
        "tokenizer_class": "TikTokenTokenizer",
    }
    with open(os.path.join(args.outdir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    print("%s: %d ranks + %d special ids = %d" % (args.outdir, first, NUM_SPECIAL, first + NUM_SPECIAL))


if __name__ == "__main__":
    main()
