// vision_client.mjs - gate 18's real client for images: the official OpenAI
// npm package sends an image_url content part (a data URL) to `k3 serve`.
//
//   node tests/gates/vision_client.mjs BASE_URL WANT.json
//
// WANT.json (tests/ref/vision_serve_check.py): the data URL, the system
// message, the answer length, and the prompt and generated ids that
// `k3 --chat --image` gave for the same conversation. The answer, whole and
// streamed, must carry exactly those ids (return_token_ids). Exits 0 when so.
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';

const [base, wantFile] = process.argv.slice(2);
if (!base || !wantFile) {
    console.error('usage: node vision_client.mjs BASE_URL WANT.json');
    process.exit(2);
}
const want = JSON.parse(readFileSync(wantFile, 'utf8'));
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
const same = (x, y) => JSON.stringify(x) === JSON.stringify(y);

const params = {
    messages: [
        { role: 'system', content: want.system },
        { role: 'user', content: [
            { type: 'image_url', image_url: { url: want.url, detail: 'high' } },
            { type: 'text', text: 'What is it?' },
        ] },
    ],
    max_tokens: want.gen, temperature: 0, ignore_eos: true, return_token_ids: true,
    reasoning_effort: 'max',
};

const whole = await client.chat.completions.create(params);
if (!same(whole.prompt_token_ids, want.prompt) || !same(whole.choices[0].token_ids, want.ids)) {
    console.error(`FAIL: the whole answer's ids: ${JSON.stringify(whole.choices[0].token_ids)} ` +
                  `vs ${JSON.stringify(want.ids)}`);
    process.exit(1);
}
const stream = await client.chat.completions.create({ ...params, stream: true });
let prompt = null, ids = null;
for await (const chunk of stream) {
    prompt = chunk.prompt_token_ids ?? prompt;
    for (const c of chunk.choices)
        ids = c.token_ids ?? ids;
}
if (!same(prompt, want.prompt) || !same(ids, want.ids)) {
    console.error(`FAIL: the streamed answer's ids: ${JSON.stringify(ids)} vs ${JSON.stringify(want.ids)}`);
    process.exit(1);
}
console.log(`ok the openai client with an image_url part: ${want.prompt.length} prompt ids and ` +
            `${want.ids.length} generated equal k3 --chat --image's, whole and streamed`);
