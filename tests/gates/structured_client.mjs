// structured_client.mjs - gate 54's real client: the official OpenAI npm
// package asking `k3 serve` for structured outputs.
//
//   node tests/gates/structured_client.mjs BASE_URL MODEL OUT_DIR
//
// Writes, for the gate to validate with python3-jsonschema (an independent
// validator), OUT_DIR/NAME.json = {"schema": ..., "value": <the parsed
// answer>} for:
//   schema_whole, schema_stream    response_format json_schema strict;
//   required_whole, required_stream  tool_choice "required": each call's
//                                  arguments under its tool's parameters;
//   named_whole, named_stream      a named function: one call of that tool.
// Checks here: the answers parse (content as JSON, tool call arguments as
// JSON objects), finish_reason is "stop" / "tool_calls", streamed deltas
// join to a well-formed answer; an unsupported keyword with strict is a
// BadRequestError naming the keyword and its pointer; without strict the
// answer carries "warnings" naming it. Exits 0 when all hold.
import fs from 'node:fs';
import OpenAI from 'openai';

const [base, model, out] = process.argv.slice(2);
if (!base || !model || !out) {
    console.error('usage: node structured_client.mjs BASE_URL MODEL OUT_DIR');
    process.exit(2);
}
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 300000 });

function check(cond, what, detail) {
    if (!cond) {
        console.error(`FAIL: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail)}`);
        process.exit(1);
    }
}

function save(name, schema, value) {
    fs.writeFileSync(`${out}/${name}.json`, JSON.stringify({ schema, value }));
}

const person = {
    type: 'object',
    properties: {
        name: { type: 'string', maxLength: 16 },
        age: { type: 'integer', minimum: 0, maximum: 150 },
        colours: { type: 'array', items: { enum: ['red', 'green', 'blue'] }, minItems: 1, maxItems: 3 },
    },
    required: ['name', 'age', 'colours'],
    additionalProperties: false,
};
const tools = [
    {
        type: 'function',
        function: {
            name: 'get_weather',
            description: 'The weather in a city',
            parameters: {
                type: 'object',
                properties: { city: { type: 'string', maxLength: 20 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
                required: ['city', 'days'],
            },
        },
    },
    {
        type: 'function',
        function: {
            name: 'set_alarm',
            description: 'Set an alarm',
            parameters: {
                type: 'object',
                properties: { hour: { type: 'integer', minimum: 0, maximum: 23 }, label: { type: 'string', maxLength: 10 } },
                required: ['hour'],
            },
        },
    },
];
const params = Object.fromEntries(tools.map((t) => [t.function.name, t.function.parameters]));
const messages = [{ role: 'user', content: 'Describe a person as JSON, or call a tool.' }];
const common = { model, messages, temperature: 0, max_tokens: 200 };

// A streamed chat answer joined: content, reasoning, tool calls, finish.
async function joined(stream) {
    let content = '', reasoning = '', finish = null, warnings = null;
    const calls = [];
    for await (const c of stream) {
        if (c.warnings) warnings = c.warnings;
        const ch = c.choices[0];
        if (!ch) continue;
        if (ch.delta?.content) content += ch.delta.content;
        if (ch.delta?.reasoning_content) reasoning += ch.delta.reasoning_content;
        for (const tc of ch.delta?.tool_calls || []) {
            const i = tc.index ?? calls.length;
            calls[i] = calls[i] || { name: '', arguments: '' };
            if (tc.function?.name) calls[i].name += tc.function.name;
            if (tc.function?.arguments) calls[i].arguments += tc.function.arguments;
        }
        if (ch.finish_reason) finish = ch.finish_reason;
    }
    return { content, reasoning, calls, finish, warnings };
}

function parsed(text, what) {
    try {
        return JSON.parse(text);
    } catch (err) {
        check(false, `${what}: not JSON`, text);
    }
}

// 1. response_format json_schema, strict.
const rf = { type: 'json_schema', json_schema: { name: 'person', schema: person, strict: true } };
{
    const r = await client.chat.completions.create({ ...common, response_format: rf });
    const ch = r.choices[0];
    check(ch.finish_reason === 'stop', 'schema_whole: finish_reason stop', ch.finish_reason);
    save('schema_whole', person, parsed(ch.message.content, 'schema_whole'));
    const s = await joined(await client.chat.completions.create({ ...common, response_format: rf, stream: true }));
    check(s.finish === 'stop', 'schema_stream: finish_reason stop', s.finish);
    check(s.content === ch.message.content, 'schema_stream: the same content as whole', [s.content, ch.message.content]);
    save('schema_stream', person, parsed(s.content, 'schema_stream'));
    console.log(`ok json_schema strict, whole and streamed: ${ch.message.content}`);
}

// 2. tool_choice required and named, whole and streamed.
for (const [name, choice] of [
    ['required', 'required'],
    ['named', { type: 'function', function: { name: 'set_alarm' } }],
]) {
    const req = { ...common, tools, tool_choice: choice };
    const r = await client.chat.completions.create(req);
    const ch = r.choices[0];
    check(ch.finish_reason === 'tool_calls', `${name}_whole: finish_reason tool_calls`, ch.finish_reason);
    const calls = ch.message.tool_calls || [];
    check(calls.length >= 1, `${name}_whole: a tool call`, ch.message);
    if (name === 'named')
        check(calls.length === 1 && calls[0].function.name === 'set_alarm', 'named: one call of set_alarm', calls);
    const whole = calls.map((c) => ({ name: c.function.name, arguments: c.function.arguments }));
    for (const c of whole) check(params[c.name], `${name}: a declared tool`, c.name);
    save(`${name}_whole`, null, whole.map((c) => ({ schema: params[c.name], value: parsed(c.arguments, name) })));
    const s = await joined(await client.chat.completions.create({ ...req, stream: true }));
    check(s.finish === 'tool_calls', `${name}_stream: finish_reason tool_calls`, s.finish);
    check(JSON.stringify(s.calls) === JSON.stringify(whole), `${name}_stream: the calls of the whole answer`, [s.calls, whole]);
    save(`${name}_stream`, null, s.calls.map((c) => ({ schema: params[c.name], value: parsed(c.arguments, name) })));
    console.log(`ok tool_choice ${name}, whole and streamed: ${JSON.stringify(whole)}`);
}

// 3. An unsupported keyword: strict refuses it by name and pointer; not
// strict warns.
const odd = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], patternProperties: { '^x': { type: 'string' } } };
try {
    await client.chat.completions.create({
        ...common,
        response_format: { type: 'json_schema', json_schema: { name: 'odd', schema: odd, strict: true } },
    });
    check(false, 'strict with an unsupported keyword was answered');
} catch (err) {
    check(err instanceof OpenAI.BadRequestError, 'strict unsupported: a 400', String(err));
    check(/patternProperties/.test(err.message) && /at \//.test(err.message),
        'strict unsupported: names the keyword and its pointer', err.message);
    console.log(`ok strict unsupported keyword: ${err.message}`);
}
{
    const rq = { ...common, response_format: { type: 'json_schema', json_schema: { name: 'odd', schema: odd } } };
    const r = await client.chat.completions.create(rq);
    check(Array.isArray(r.warnings) && r.warnings.some((w) => /patternProperties/.test(w)),
        'not strict: the answer warns about the keyword', r.warnings);
    const v = parsed(r.choices[0].message.content, 'not strict');
    check(typeof v.a === 'string', 'not strict: the rest is enforced', v);
    const s = await joined(await client.chat.completions.create({ ...rq, stream: true }));
    check(Array.isArray(s.warnings) && s.warnings.some((w) => /patternProperties/.test(w)),
        'not strict, streamed: a chunk warns', s.warnings);
    console.log(`ok not strict: warnings ${JSON.stringify(r.warnings)}`);
}
