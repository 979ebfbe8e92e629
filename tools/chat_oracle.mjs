// chat_oracle.mjs - expected token ids of the release's chat vectors, from
// the official tiktoken core (npm `tiktoken`). The reference for
// tests/gates/35-chat-vectors.sh.
//
//   node tools/chat_oracle.mjs TOKDIR VECTORS.json OUTDIR
//
// VECTORS is k3-release/chat_vectors.json: conversations with the segments
// and rendered string the release's own encoder produced. For case i
// (case-01, case-02, ...) writes OUTDIR/case-NN.json (the conversation as
// `k3 --render-chat` reads it: messages, tools, options), case-NN.rendered
// (the expected string, no newline) and case-NN.ids (the expected ids, as
// `k3 --render-chat --tokenize` prints them: each VECTOR segment encoded on
// its own - encode(s, "all") when allow_special, encode(s, [], []) when not -
// concatenated). OUTDIR/cases.txt lists "case-NN name" per line.
//
// The ids come from the vectors' segments, not from k3's renderer, so the
// gate checks the renderer and the tokenizer against the release at once.
import fs from "node:fs";
import { encodeKimi, loadOracle } from "./tok_oracle.mjs";

const [dir, vectors, outdir] = process.argv.slice(2);
if (!outdir) {
    console.error("usage: node tools/chat_oracle.mjs TOKDIR VECTORS.json OUTDIR");
    process.exit(2);
}
const { enc } = loadOracle(dir);
// MODEL.md §5.3's test vector: the oracle itself is set up right.
const probe = encodeKimi(enc, "The capital of France is", false).join(",");
if (probe !== "1008,10484,318,15383,387")
    throw new Error(`oracle self-check failed: "The capital of France is" -> ${probe}`);

const { cases } = JSON.parse(fs.readFileSync(vectors, "utf8"));
fs.mkdirSync(outdir, { recursive: true });
const list = [];
cases.forEach((c, i) => {
    const id = `case-${String(i + 1).padStart(2, "0")}`;
    const joined = c.segments.map((s) => s.text).join("");
    if (joined !== c.rendered)
        throw new Error(`${c.name}: the vector's segments do not concatenate to its rendered string`);
    const ids = c.segments.flatMap((s) => encodeKimi(enc, s.text, s.allow_special));
    const input = { messages: c.messages, tools: c.tools, options: c.options };
    fs.writeFileSync(`${outdir}/${id}.json`, JSON.stringify(input));
    fs.writeFileSync(`${outdir}/${id}.rendered`, c.rendered);
    fs.writeFileSync(`${outdir}/${id}.ids`, ids.join(",") + "\n");
    list.push(`${id} ${c.name}\n`);
});
fs.writeFileSync(`${outdir}/cases.txt`, list.join(""));
enc.free();
