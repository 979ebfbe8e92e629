// agent_sdks.mjs - gate 56's official SDK clients against `k3 serve`:
//
//   node tests/gates/agent_sdks.mjs BASE_URL MODEL
//
// @anthropic-ai/sdk: messages.create (whole), messages.stream (its final
// message equals the whole one under greedy decoding), a tool_use /
// tool_result round trip (the client sends the assistant's tool_use back with
// its result and gets an answer), messages.countTokens (= usage input +
// cache read). openai: responses.create (whole), responses.stream (final
// response equals the whole one), a function_call / function_call_output
// round trip. Exits 0 when all hold; one line per check.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';

const [base, model] = process.argv.slice(2);
const anthropic = new Anthropic({ baseURL: base, apiKey: 'dummy', maxRetries: 0, timeout: 300000 });
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'dummy', maxRetries: 0, timeout: 300000 });

function check(cond, what, detail) {
    if (!cond) {
        console.error(`FAIL: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail)}`);
        process.exit(1);
    }
}

const tool = {
    name: 'get_weather',
    description: 'The weather in a city.',
    input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
const text = (m) => m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');

// Anthropic
const req = {
    model, max_tokens: 64, temperature: 0, system: 'You are terse.', tools: [tool],
    messages: [{ role: 'user', content: 'Say hello' }],
};
const whole = await anthropic.messages.create(req);
check(whole.type === 'message' && whole.role === 'assistant', 'anthropic: message shape', whole);
check(['end_turn', 'max_tokens'].includes(whole.stop_reason), 'anthropic: stop_reason', whole);
const streamed = await anthropic.messages.stream(req).finalMessage();
check(text(streamed) === text(whole) && streamed.stop_reason === whole.stop_reason,
    'anthropic: streamed final message equals the whole one', [text(streamed), text(whole)]);
console.log(`ok anthropic messages, whole and streamed: ${JSON.stringify(text(whole))} (${whole.stop_reason})`);

const count = await anthropic.messages.countTokens({
    model, system: req.system, tools: req.tools, messages: req.messages,
});
const u = whole.usage;
check(count.input_tokens === u.input_tokens + (u.cache_read_input_tokens || 0),
    'anthropic: countTokens = input + cache read', [count, u]);
console.log(`ok anthropic countTokens: ${count.input_tokens}`);

const round = await anthropic.messages.create({
    ...req,
    messages: [
        ...req.messages,
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { city: 'Paris' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01', content: 'sunny, 21 C' }] },
    ],
});
check(round.type === 'message' && round.usage.input_tokens + (round.usage.cache_read_input_tokens || 0) > count.input_tokens,
    'anthropic: tool_use / tool_result round trip', round);
console.log(`ok anthropic tool_use/tool_result round trip: ${JSON.stringify(text(round))}`);

// OpenAI Responses
const rreq = {
    model, max_output_tokens: 64, temperature: 0, instructions: 'You are terse.',
    input: 'Say hello', reasoning: { effort: 'none' },
    tools: [{ type: 'function', name: tool.name, description: tool.description, parameters: tool.input_schema }],
};
const resp = await openai.responses.create(rreq);
check(resp.object === 'response' && ['completed', 'incomplete'].includes(resp.status), 'openai: response shape', resp);
const rstream = openai.responses.stream(rreq);
const types = new Set();
for await (const ev of rstream) types.add(ev.type);
const final = await rstream.finalResponse();
check(final.output_text === resp.output_text, 'openai: streamed output_text equals the whole one',
    [final.output_text, resp.output_text]);
check(types.has('response.created') && (types.has('response.completed') || types.has('response.incomplete')),
    'openai: stream events', [...types]);
console.log(`ok openai responses, whole and streamed: ${JSON.stringify(resp.output_text)} (${resp.status}; ${[...types].join(' ')})`);

const rround = await openai.responses.create({
    ...rreq,
    input: [
        { role: 'user', content: 'Weather in Paris?' },
        { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'sunny, 21 C' },
    ],
});
check(rround.object === 'response' && rround.usage.input_tokens > resp.usage.input_tokens,
    'openai: function_call / function_call_output round trip', rround);
console.log(`ok openai function_call/function_call_output round trip: ${JSON.stringify(rround.output_text)}`);
