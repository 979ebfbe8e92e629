// check_unicode_tables.mjs - checks src/tokenizer/unicode_tables.c against
// the tokenizer oracle itself, for every code point:
//
//   1. the committed file is what tools/gen_unicode_tables.mjs generates;
//   2. each character class of the pre-tokeniser pattern, as tiktoken's
//      regex engine (npm tiktoken, the WASM build of the Rust core) sees it,
//      contains exactly the code points the generated tables say.
//
//   node tools/check_unicode_tables.mjs        (exit 0 = both hold)
//
// How a class R is probed: a vocabulary of the 256 single bytes plus the
// 256 two-byte tokens "\x01"+b, and the pattern \x01(?:R)|(?s:.). Encoding
// "\x01"+c for every code point c, "\x01" and c are one piece exactly when
// c is in R, and then BPE merges "\x01" with c's first byte; otherwise
// "\x01" stays a token of its own. So R's members can be read off the ids.
import fs from "node:fs";
import { Tiktoken } from "tiktoken/lite";
import { computeTables, renderC, GC, GC_MASK, HAN, WHITE_SPACE, MAX_CP } from "./gen_unicode_tables.mjs";

const TABLES = new URL("../src/tokenizer/unicode_tables.c", import.meta.url);
const tables = await computeTables();
let failed = false;
if (fs.readFileSync(TABLES, "utf8") !== renderC(tables)) {
    console.error("src/tokenizer/unicode_tables.c is not what tools/gen_unicode_tables.mjs generates");
    failed = true;
}

const { props, fold } = tables;
const gc = (c) => props[c] & GC_MASK;
const isLetter = (c) => gc(c) >= GC.Uppercase_Letter && gc(c) <= GC.Other_Letter;
const folded = new Map(fold);
const foldAz = (c) => (c >= 0x61 && c <= 0x7a ? c : folded.get(c));
// Each class of the pattern (MODEL.md §5.4) and who belongs to it by the tables.
const UPPER = [GC.Uppercase_Letter, GC.Titlecase_Letter, GC.Modifier_Letter, GC.Other_Letter, GC.Mark];
const LOWER = [GC.Lowercase_Letter, GC.Modifier_Letter, GC.Other_Letter, GC.Mark];
const probes = [
    [String.raw`\p{Han}`, (c) => (props[c] & HAN) !== 0],
    [String.raw`[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]`, (c) => UPPER.includes(gc(c)) && !(props[c] & HAN)],
    [String.raw`[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]`, (c) => LOWER.includes(gc(c)) && !(props[c] & HAN)],
    [String.raw`\p{L}`, isLetter],
    [String.raw`\p{N}`, (c) => gc(c) === GC.Number],
    [String.raw`\s`, (c) => (props[c] & WHITE_SPACE) !== 0],
    ...[..."strevmld"].map((l) => [`(?i:${l})`, (c) => foldAz(c) === l.charCodeAt(0)]),
];

const lines = [];
for (let b = 0; b < 256; b++) lines.push(`${Buffer.from([b]).toString("base64")} ${b}`);
for (let b = 0; b < 256; b++) lines.push(`${Buffer.from([1, b]).toString("base64")} ${256 + b}`);
const model = lines.join("\n");
// Every scalar value but U+0001 (the marker itself).
const cps = [];
for (let c = 0; c < MAX_CP; c++) if (c !== 1 && (c < 0xd800 || c > 0xdfff)) cps.push(c);
const text = cps.map((c) => "\x01" + String.fromCodePoint(c)).join("");
const utf8Len = (c) => (c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4);

for (const [cls, expected] of probes) {
    const enc = new Tiktoken(model, {}, String.raw`\x01(?:${cls})|(?s:.)`);
    const ids = enc.encode(text, [], []);
    enc.free();
    let k = 0, wrong = [];
    for (const c of cps) {
        const member = ids[k] >= 256;
        k += member ? utf8Len(c) : 1 + utf8Len(c);
        if (member !== expected(c)) wrong.push(c);
    }
    if (k !== ids.length) throw new Error(`probe ${cls}: could not read the ids`);
    const show = wrong.slice(0, 8).map((c) => "U+" + c.toString(16).toUpperCase().padStart(4, "0"));
    console.log(`${cls}: ${wrong.length ? `${wrong.length} code points differ: ${show.join(" ")}` : "matches"}`);
    failed ||= wrong.length > 0;
}
console.log(failed ? "unicode tables: MISMATCH" : `unicode tables: all ${cps.length} code points match in ${probes.length} classes`);
process.exit(failed ? 1 : 0);
