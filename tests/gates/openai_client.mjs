// openai_client.mjs - the serve gate's real client: the official OpenAI
// npm package talking to `k3 serve`.
//
//   node tests/gates/openai_client.mjs BASE_URL MODEL
//
// Checks, with greedy decoding (temperature 0) so answers are reproducible:
//  1. chat completion (not streamed): the response's shape;
//  2. the same request streamed: chunk shapes, and the concatenated deltas
//     equal the whole answer (content, and reasoning_content when thinking);
//  3. text completion, whole and streamed, the same way;
//  4. a wrong-typed field: BadRequestError naming the field;
//  5. a burst of 8 different requests at once: each answer equals the one
//     the same request got alone;
//  6. a stream aborted mid-way: the server stops that generation (it is
//     idle again long before the 3000 requested tokens could have been
//     made; the gate also finds it logged as cancelled) and still answers
//     the next request correctly.
// Exits 0 when all hold; prints one line per check.
import OpenAI from 'openai';

const [base, model] = process.argv.slice(2);
if (!base || !model) {
    console.error('usage: node openai_client.mjs BASE_URL MODEL');
    process.exit(2);
}
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });

function check(cond, what, detail) {
    if (!cond) {
        console.error(`FAIL: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail)}`);
        process.exit(1);
    }
}

const messages = [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Name three colours.' },
];

function checkUsage(u, maxTokens) {
    check(u && u.prompt_tokens > 0 && u.completion_tokens >= 1 && u.completion_tokens <= maxTokens &&
          u.total_tokens === u.prompt_tokens + u.completion_tokens, 'usage', u);
}

// Streams a request; returns the concatenated deltas, finish reason and usage.
async function collect(params) {
    const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
    const out = { content: '', reasoning: '', finish: null, usage: null, role: null, chunks: 0 };
    for await (const chunk of stream) {
        check(chunk.object === 'chat.completion.chunk' && chunk.id.startsWith('chatcmpl-') && chunk.model === model,
              'chunk shape', chunk);
        out.chunks++;
        if (chunk.usage)
            out.usage = chunk.usage;
        for (const c of chunk.choices) {
            check(c.index === 0, 'chunk choice index', c);
            out.role = out.role ?? c.delta.role ?? null;
            out.content += c.delta.content ?? '';
            out.reasoning += c.delta.reasoning_content ?? '';
            if (c.finish_reason)
                out.finish = c.finish_reason;
        }
    }
    return out;
}

// 1-2: chat without and with thinking, whole and streamed.
for (const thinking of [false, true]) {
    const params = { model, messages, max_tokens: 12, temperature: 0, thinking };
    const whole = await client.chat.completions.create(params);
    check(whole.object === 'chat.completion' && whole.id.startsWith('chatcmpl-') && whole.model === model &&
          typeof whole.created === 'number', 'chat completion shape', whole);
    check(whole.choices.length === 1, 'one choice', whole.choices);
    const ch = whole.choices[0], msg = ch.message;
    check(msg.role === 'assistant' && typeof msg.content === 'string', 'message shape', msg);
    check(['stop', 'length'].includes(ch.finish_reason), 'finish_reason', ch.finish_reason);
    checkUsage(whole.usage, 12);
    const streamed = await collect(params);
    check(streamed.role === 'assistant', 'the first chunk names the role', streamed);
    check(streamed.content === msg.content, 'streamed content equals the whole answer',
          { streamed: streamed.content, whole: msg.content });
    check(streamed.reasoning === (msg.reasoning_content ?? ''), 'streamed reasoning equals the whole answer',
          { streamed: streamed.reasoning, whole: msg.reasoning_content });
    check(streamed.finish === ch.finish_reason, 'streamed finish_reason', streamed.finish);
    check(streamed.usage && streamed.usage.completion_tokens === whole.usage.completion_tokens,
          'streamed usage', streamed.usage);
    if (thinking)
        check((msg.reasoning_content ?? '').length + msg.content.length > 0, 'thinking answer has text', msg);
    else
        check(msg.content.length > 0 && msg.reasoning_content === undefined, 'non-thinking answer is content', msg);
    console.log(`ok chat (thinking ${thinking}): ${whole.usage.completion_tokens} tokens, ` +
                `${streamed.chunks} chunks, finish ${ch.finish_reason}`);
}

// 3: text completion, whole and streamed.
{
    const params = { model, prompt: 'The capital of France is', max_tokens: 10, temperature: 0 };
    const whole = await client.completions.create(params);
    check(whole.object === 'text_completion' && whole.id.startsWith('cmpl-') && whole.model === model,
          'completion shape', whole);
    const c = whole.choices[0];
    check(typeof c.text === 'string' && c.text.length > 0 && ['stop', 'length'].includes(c.finish_reason),
          'completion choice', c);
    checkUsage(whole.usage, 10);
    check(whole.usage.prompt_tokens === 5, 'the prompt is the 5 tokens of MODEL.md §5.3', whole.usage);
    const stream = await client.completions.create({ ...params, stream: true });
    let text = '', finish = null;
    for await (const chunk of stream) {
        check(chunk.object === 'text_completion', 'completion chunk shape', chunk);
        text += chunk.choices[0]?.text ?? '';
        finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    check(text === c.text && finish === c.finish_reason, 'streamed completion equals the whole one', { text, whole: c.text });
    console.log(`ok completion: ${whole.usage.completion_tokens} tokens, finish ${c.finish_reason}`);
}

// 4: a field of the wrong type.
try {
    await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 'hot' });
    check(false, 'temperature "hot" was accepted');
} catch (err) {
    check(err instanceof OpenAI.BadRequestError && err.status === 400 && err.param === 'temperature' &&
          err.type === 'invalid_request_error', 'wrong type -> 400 naming the field',
          { status: err.status, param: err.param, type: err.type, message: err.message });
    console.log(`ok wrong type: 400 ${err.message}`);
}

// 5: a burst of 8 at once against the same 8 alone.
{
    const requests = Array.from({ length: 8 }, (_, i) => ({
        model, temperature: 0, max_tokens: 4 + i, thinking: i % 2 === 0,
        messages: [{ role: 'user', content: `Count to ${i + 1}, please.` }],
    }));
    const answer = r => ({ choices: r.choices, prompt: r.usage.prompt_tokens, completion: r.usage.completion_tokens });
    const alone = [];
    for (const r of requests)
        alone.push(answer(await client.chat.completions.create(r)));
    const burst = (await Promise.all(requests.map(r => client.chat.completions.create(r)))).map(answer);
    for (let i = 0; i < 8; i++)
        check(JSON.stringify(burst[i]) === JSON.stringify(alone[i]), `burst answer ${i} equals its answer alone`,
              { burst: burst[i], alone: alone[i] });
    check(new Set(alone.map(a => JSON.stringify(a.choices))).size > 1, 'the 8 requests have different answers');
    console.log('ok burst: 8 concurrent answers equal the sequential ones');
}

// 6: abort a long stream after a few chunks.
{
    const reference = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0, thinking: false });
    const controller = new AbortController();
    const t0 = Date.now();
    let chunks = 0, finish = null;
    try {
        const stream = await client.chat.completions.create(
            { model, messages, max_tokens: 3000, temperature: 0, stream: true }, { signal: controller.signal });
        for await (const chunk of stream) {
            finish = chunk.choices[0]?.finish_reason ?? finish;
            if (chunk.choices.length && ++chunks === 3)
                controller.abort(); /* the iteration ends, by a throw or not */
        }
    } catch (err) {
        check(err instanceof OpenAI.APIUserAbortError || err.name === 'AbortError', 'abort error', String(err));
    }
    check(controller.signal.aborted && finish === null, 'the stream was cut before its end', { chunks, finish });
    // The server notices at its next token and goes idle.
    let idle = false;
    for (let i = 0; i < 600 && !idle; i++) {
        const health = await (await fetch(`${base}/health`)).json();
        idle = health.running === 0 && health.waiting === 0;
        if (!idle)
            await new Promise(r => setTimeout(r, 50));
    }
    check(idle, 'the server stopped the aborted generation');
    const again = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0, thinking: false });
    check(JSON.stringify(again.choices) === JSON.stringify(reference.choices), 'answer after the abort is still right',
          { again: again.choices, reference: reference.choices });
    console.log(`ok abort: cancelled after ${chunks} chunks, idle after ${Date.now() - t0} ms, next answer right`);
}
console.log('openai client: all checks passed');
