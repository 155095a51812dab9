// Tool calling as an agent does it, with the official `openai` npm client
// against a running conveyor server: a forced call (tool_choice "required"),
// a named call streamed (deltas joined by hand and by the client's own
// ChatCompletionStream), the result sent back as a `tool` message, and a
// tool_choice naming an unknown function refused. Run by
// tests/integration/openai_node_test.cpp:
//   CONVEYOR_URL=http://127.0.0.1:PORT node tool_check.mjs
// The models there have random weights: only what the constraint guarantees
// (valid calls of declared functions with schema-valid arguments) is checked.
// Prints one JSON line with what it saw; exits 1 when a check fails.
import OpenAI from 'openai';

const baseURL = `${process.env.CONVEYOR_URL}/v1`;
const client = new OpenAI({ baseURL, apiKey: 'not-needed', maxRetries: 0, timeout: 300_000 });

const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); };

const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: {
        type: 'object',
        properties: {
          city: { type: 'string', minLength: 1, maxLength: 12 },
          unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
          days: { type: 'integer', minimum: 1, maximum: 7 },
        },
        required: ['city', 'unit', 'days'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'get_time',
      description: 'The time in a zone',
      parameters: { type: 'object', properties: { zone: { enum: ['UTC', 'CET'] } }, required: ['zone'] },
    },
  },
];

// What the schemas promise, checked on parsed arguments.
function validArguments(name, text) {
  let args;
  try { args = JSON.parse(text); } catch { return false; }
  if (name === 'get_weather') {
    return typeof args.city === 'string' && args.city.length >= 1 && [...args.city].length <= 12 &&
      ['celsius', 'fahrenheit'].includes(args.unit) && Number.isInteger(args.days) && args.days >= 1 &&
      args.days <= 7 && Object.keys(args).length === 3;
  }
  if (name === 'get_time') return ['UTC', 'CET'].includes(args.zone) && Object.keys(args).length === 1;
  return false;
}

const model = (await client.models.list()).data[0]?.id;
const question = { role: 'user', content: 'What is the weather in Oslo this week?' };

// 1. A forced call, whole.
const forced = await client.chat.completions.create({
  model, messages: [question], tools, tool_choice: 'required', parallel_tool_calls: false,
  max_tokens: 300, temperature: 0.8, seed: 7,
});
const forcedChoice = forced.choices[0];
const forcedCalls = forcedChoice.message.tool_calls ?? [];
check(forcedChoice.finish_reason === 'tool_calls', `forced: finish_reason tool_calls (got ${forcedChoice.finish_reason})`);
check(forcedCalls.length === 1, `forced: one call (got ${forcedCalls.length})`);
check(forcedChoice.message.content === null, 'forced: content null');
for (const call of forcedCalls) {
  check(call.type === 'function' && typeof call.id === 'string' && call.id.length > 0, 'forced: call id and type');
  check(validArguments(call.function.name, call.function.arguments),
        `forced: valid arguments for ${call.function.name}: ${call.function.arguments}`);
}

// 2. A named call, streamed: the deltas join into one call.
const named = { type: 'function', function: { name: 'get_time' } };
const stream = await client.chat.completions.create({
  model, messages: [{ role: 'user', content: 'What time is it?' }], tools, tool_choice: named,
  parallel_tool_calls: false, max_tokens: 100, stream: true,
});
const joined = {};
let streamFinish = null, argumentFragments = 0;
for await (const chunk of stream) {
  const choice = chunk.choices?.[0];
  if (!choice) continue;
  for (const d of choice.delta?.tool_calls ?? []) {
    const call = (joined[d.index] ??= { id: null, name: null, arguments: '' });
    if (d.id) {
      check(call.id === null, 'streamed: one first fragment per call');
      call.id = d.id;
      call.name = d.function?.name ?? null;
      check(d.type === 'function', 'streamed: the first fragment says type function');
    }
    if (d.function?.arguments) { call.arguments += d.function.arguments; argumentFragments += 1; }
  }
  streamFinish = choice.finish_reason ?? streamFinish;
}
const streamedCalls = Object.values(joined);
check(streamedCalls.length === 1, `streamed: one call (got ${streamedCalls.length})`);
check(streamedCalls[0]?.name === 'get_time', `streamed: the named function (got ${streamedCalls[0]?.name})`);
check(validArguments('get_time', streamedCalls[0]?.arguments ?? ''), `streamed: valid arguments ${streamedCalls[0]?.arguments}`);
check(argumentFragments >= 2, `streamed: arguments arrive in pieces (got ${argumentFragments})`);
check(streamFinish === 'tool_calls', `streamed: finish_reason tool_calls (got ${streamFinish})`);

// The client's own stream helper assembles the same deltas.
const helper = client.beta.chat.completions.stream({
  model, messages: [{ role: 'user', content: 'Time in Paris?' }], tools, tool_choice: named,
  parallel_tool_calls: false, max_tokens: 100,
});
const final = await helper.finalChatCompletion();
const helperCalls = final.choices[0]?.message?.tool_calls ?? [];
check(helperCalls.length === 1 && helperCalls[0].function.name === 'get_time' &&
      validArguments('get_time', helperCalls[0].function.arguments),
      `ChatCompletionStream: one valid call (got ${JSON.stringify(helperCalls)})`);

// 3. The result goes back; the model answers (tool_choice none: prose).
const history = [question, forcedChoice.message];
for (const call of forcedCalls) {
  history.push({ role: 'tool', tool_call_id: call.id, content: JSON.stringify({ temperature: -3, sky: 'snow' }) });
}
const answer = await client.chat.completions.create({
  model, messages: history, tools, tool_choice: 'none', max_tokens: 16,
});
check(['stop', 'length'].includes(answer.choices[0].finish_reason),
      `after the result: finish_reason stop or length (got ${answer.choices[0].finish_reason})`);
check(typeof answer.choices[0].message.content === 'string' && answer.choices[0].message.tool_calls === undefined,
      'after the result: prose, no calls');

// 4. A tool_choice that names no declared function is a 400 naming it.
let refused = null;
try {
  await client.chat.completions.create({
    model, messages: [question], tools, tool_choice: { type: 'function', function: { name: 'rm_rf' } }, max_tokens: 4,
  });
} catch (e) {
  refused = e;
}
check(refused?.status === 400 && refused?.param === 'tool_choice',
      `unknown function: 400 with param tool_choice (got ${refused?.status} ${refused?.param})`);

console.log(JSON.stringify({
  model,
  forced: forcedCalls.map((c) => c.function),
  streamed: streamedCalls,
  helper: helperCalls.map((c) => c.function),
  answer: answer.choices[0].message.content,
  failures,
}));
process.exit(failures.length === 0 ? 0 : 1);
