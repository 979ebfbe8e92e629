// tok_oracle.mjs - expected token ids from the official tiktoken core (npm
// `tiktoken`, the WASM build of the Rust core), driven the way Kimi's
// tokenization_kimi.py drives it. The reference for tests/gates/30-tokenizer.sh.
//
//   node tools/tok_oracle.mjs TOKDIR CORPUS.jsonl OUT_PREFIX [special|ordinary]
//
// TOKDIR holds tiktoken.model and tokenizer_config.json; CORPUS has one JSON
// string per line. Writes OUT_PREFIX.special (allow-special encoding:
// encode(s, "all")) and OUT_PREFIX.ordinary (special tokens are plain text:
// encode(s, [], [])), or only the one named: one line of comma-separated
// ids per case, the format of `k3 --tokenize`. (Two processes, one per
// encoding, use both cores.)
import fs from "node:fs";
import readline from "node:readline";
import { Tiktoken } from "tiktoken/lite";

// Kimi's pat_str, verbatim from the release's tokenization_kimi.py (MODEL.md §5.4 says
// it in words; src/tokenizer/pretok.h gives its structure).
const PAT_STR = [
    String.raw`[\p{Han}]+`,
    String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
    String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
    String.raw`\p{N}{1,3}`,
    String.raw` ?[^\s\p{L}\p{N}]+[\r\n]*`,
    String.raw`\s*[\r\n]+`,
    String.raw`\s+(?!\S)`,
    String.raw`\s+`,
].join("|");

const NUM_SPECIAL = 256; // the special range after the ranks
const MAX_ENCODE_CHARS = 400000; // TIKTOKEN_MAX_ENCODE_CHARS
const MAX_RUN_CHARS = 25000; // MAX_NO_WHITESPACES_CHARS

// Python's str.isspace() (python3 -c "print([hex(c) for c in range(0x110000)
// if chr(c).isspace()])"): White_Space plus U+001C..U+001F.
const PY_SPACE = new Set([0x9, 0xa, 0xb, 0xc, 0xd, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0,
    0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009,
    0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000]);

export function loadOracle(dir) {
    const model = fs.readFileSync(`${dir}/tiktoken.model`, "utf8");
    const nranks = model.split("\n").filter((l) => l.length > 0).length;
    const config = JSON.parse(fs.readFileSync(`${dir}/tokenizer_config.json`, "utf8"));
    const specials = {};
    for (let id = nranks; id < nranks + NUM_SPECIAL; id++)
        specials[config.added_tokens_decoder[id]?.content ?? `<|reserved_token_${id}|>`] = id;
    return { enc: new Tiktoken(model, specials, PAT_STR), nranks };
}

// tokenization_kimi.py's _split_whitespaces_or_nonwhitespaces, over an array
// of code points (Python indexes strings by code point).
function* splitRuns(cps) {
    let runLen = 0;
    let runSpace = cps.length > 0 && PY_SPACE.has(cps[0].codePointAt(0));
    let start = 0;
    for (let i = 0; i < cps.length; i++) {
        const space = PY_SPACE.has(cps[i].codePointAt(0));
        if (runSpace !== space) {
            runLen = 1;
            runSpace = space;
        } else if (++runLen > MAX_RUN_CHARS) {
            yield cps.slice(start, i).join("");
            start = i;
            runLen = 1;
        }
    }
    yield cps.slice(start).join("");
}

// tokenization_kimi.py's encode: 400,000-character chunks, each cut by the
// run rule, each part one call of the core.
export function encodeKimi(enc, text, allowSpecial) {
    const cps = Array.from(text);
    const ids = [];
    for (let i = 0; i < cps.length; i += MAX_ENCODE_CHARS)
        for (const part of splitRuns(cps.slice(i, i + MAX_ENCODE_CHARS)))
            for (const id of allowSpecial ? enc.encode(part, "all") : enc.encode(part, [], []))
                ids.push(id);
    return ids;
}

async function main() {
    const [dir, corpus, prefix, only] = process.argv.slice(2);
    const kinds = only ? [only] : ["special", "ordinary"];
    if (!prefix || !kinds.every((k) => k === "special" || k === "ordinary")) {
        console.error("usage: node tools/tok_oracle.mjs TOKDIR CORPUS.jsonl OUT_PREFIX [special|ordinary]");
        process.exit(2);
    }
    const { enc, nranks } = loadOracle(dir);
    // MODEL.md §5.3's test vector, when this is the release vocabulary.
    if (nranks === 163584) {
        const got = encodeKimi(enc, "The capital of France is", false).join(",");
        if (got !== "1008,10484,318,15383,387")
            throw new Error(`oracle self-check failed: "The capital of France is" -> ${got}`);
    }
    const out = Object.fromEntries(kinds.map((k) => [k, fs.createWriteStream(`${prefix}.${k}`)]));
    const lines = readline.createInterface({ input: fs.createReadStream(corpus), crlfDelay: Infinity });
    for await (const line of lines) {
        const text = JSON.parse(line);
        for (const k of kinds) out[k].write(encodeKimi(enc, text, k === "special").join(",") + "\n");
    }
    await Promise.all(kinds.map((k) => new Promise((done) => out[k].end(done))));
    enc.free();
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
