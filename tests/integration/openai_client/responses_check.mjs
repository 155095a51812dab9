// The Responses API of a running conveyor server through the official
// `openai` npm client: create, stream (the event iterator and the stream
// helper), previous_response_id, retrieve and delete, text.format
// json_schema, and function tools. Run by tests/integration/openai_node_test.cpp:
//   CONVEYOR_URL=http://127.0.0.1:PORT node responses_check.mjs
// The model has random weights: the checks are about the protocol, and
// structured output and calls hold because the server constrains them.
// Prints one JSON line with what it saw; exits 1 when a check fails.
import OpenAI from 'openai';

const baseURL = `${process.env.CONVEYOR_URL}/v1`;
const client = new OpenAI({ baseURL, apiKey: process.env.CONVEYOR_API_KEY ?? 'not-needed', maxRetries: 0, timeout: 120_000 });

const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); };
const seen = {};

const model = (await client.models.list()).data[0]?.id;
const instructions = 'You are a helpful assistant who answers questions about the weather in great detail.';

// 1. create
const first = await client.responses.create({ model, instructions, input: 'What is the weather like in Paris?',
                                              max_output_tokens: 12, temperature: 0 });
check(first.object === 'response' && first.id.startsWith('resp_'), 'create: a response object');
check(['completed', 'incomplete'].includes(first.status), `create: status (got ${first.status})`);
check(first.output[0]?.type === 'message' && first.output[0]?.content[0]?.type === 'output_text',
      'create: a message item with output_text');
check(typeof first.output_text === 'string' && first.output_text === first.output[0].content[0].text,
      'create: the client joins output_text');
check(first.usage?.output_tokens > 0 && first.usage?.input_tokens > 0, 'create: usage');
seen.create = { status: first.status, text: first.output_text, usage: first.usage };

// 2. stream: the raw event iterator, then the helper's final response
const stream = await client.responses.create({ model, input: 'Tell me a story.', max_output_tokens: 10,
                                               temperature: 0, stream: true });
const types = [];
let deltas = '';
let last = null;
for await (const event of stream) {
  types.push(event.type);
  if (event.sequence_number !== types.length - 1) failures.push(`stream: sequence_number ${event.sequence_number} at ${types.length - 1}`);
  if (event.type === 'response.output_text.delta') deltas += event.delta;
  last = event;
}
check(types[0] === 'response.created' && types[1] === 'response.in_progress', 'stream: created, in_progress first');
check(types.includes('response.output_item.added') && types.includes('response.content_part.added') &&
      types.includes('response.output_text.done') && types.includes('response.output_item.done'),
      'stream: the item and content part events');
check(['response.completed', 'response.incomplete'].includes(last?.type), `stream: ends completed or incomplete (got ${last?.type})`);
check(deltas.length > 0 && deltas === (last?.response?.output?.[0]?.content?.[0]?.text ?? null),
      'stream: the deltas join into the final text');
const helper = client.responses.stream({ model, input: 'Tell me a story.', max_output_tokens: 10, temperature: 0 });
let helperDeltas = '';
helper.on('response.output_text.delta', (e) => { helperDeltas += e.delta; });
const helperFinal = await helper.finalResponse();
// (this client version's helper does not join output_text: read the item)
check(helperFinal.output?.[0]?.content?.[0]?.text === helperDeltas && helperDeltas === deltas,
      'stream helper: its final response');
seen.stream = { events: types.length, text: deltas };

// 3. previous_response_id, retrieve, input items, delete
const second = await client.responses.create({ model, instructions, input: 'And tomorrow?', previous_response_id: first.id,
                                               max_output_tokens: 6, temperature: 0 });
check(second.previous_response_id === first.id, 'continue: previous_response_id echoed');
check(second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens,
      'continue: the prompt holds the first turn');
// Every full 16-token block the first turn computed (its prompt and answer
// but the last token, sampled and never fed back) is reused.
const cached = second.usage.input_tokens_details?.cached_tokens ?? 0;
const computed = first.usage.input_tokens + first.usage.output_tokens - 1;
check(cached >= Math.floor(computed / 16) * 16, `continue: the first turn's KV is reused (cached_tokens ${cached} of ${computed})`);
const fetched = await client.responses.retrieve(first.id);
check(fetched.id === first.id && fetched.output[0]?.content[0]?.text === first.output_text, 'retrieve: the stored response');
const items = await client.responses.inputItems.list(second.id);
check(items.data.length === 1 && items.data[0].type === 'message' && items.data[0].content?.[0]?.text === 'And tomorrow?',
      'inputItems.list: the input it was given');
await client.responses.del(second.id);
let gone = false;
try { await client.responses.retrieve(second.id); } catch (e) { gone = e.status === 404; }
check(gone, 'delete: then retrieve is 404');
seen.continued = { input_tokens: second.usage.input_tokens, cached_tokens: cached };

// 4. text.format json_schema (closed value sets: a random model left free
// inside a string or a number could go on until max_output_tokens)
const schema = { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Rome'] }, sunny: { type: 'boolean' } },
                 required: ['city', 'sunny'], additionalProperties: false };
const structured = await client.responses.create({
  model, input: 'Give the weather in Paris as JSON.', max_output_tokens: 200, temperature: 0,
  text: { format: { type: 'json_schema', name: 'weather', schema, strict: true } } });
let parsed = null;
try { parsed = JSON.parse(structured.output_text); } catch { /* checked below */ }
check(parsed !== null && ['Paris', 'Rome'].includes(parsed.city) && typeof parsed.sunny === 'boolean' &&
      Object.keys(parsed).length === 2, `json_schema: the output follows the schema (got ${structured.output_text})`);
check(structured.text?.format?.type === 'json_schema', 'json_schema: text.format echoed');
seen.json_schema = structured.output_text;

// 5. function tools: a named call, its output, and the conversation going on
const tools = [{ type: 'function', name: 'get_weather', description: 'The weather in a city',
                 parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Rome'] } },
                               required: ['city'],
                               additionalProperties: false }, strict: true }];
const called = await client.responses.create({ model, input: 'What is the weather in Paris?', tools,
                                               tool_choice: { type: 'function', name: 'get_weather' },
                                               max_output_tokens: 100, temperature: 0 });
const call = called.output.find((item) => item.type === 'function_call');
check(call?.name === 'get_weather' && call.call_id?.startsWith('call_') && call.id?.startsWith('fc_'),
      `tools: a function_call item (got ${JSON.stringify(called.output)})`);
let args = null;
try { args = JSON.parse(call?.arguments ?? ''); } catch { /* checked below */ }
check(args !== null && ['Paris', 'Rome'].includes(args.city), 'tools: its arguments follow the schema');
const answered = await client.responses.create({ model, tools, previous_response_id: called.id,
  input: [{ type: 'function_call_output', call_id: call?.call_id, output: '{"temperature_c": 18}' }],
  max_output_tokens: 8, temperature: 0 });
check(['completed', 'incomplete'].includes(answered.status), 'tools: the call\'s output continues the conversation');
// Streamed: the call's arguments arrive as function_call_arguments deltas.
const streamed = await client.responses.create({ model, input: 'Weather in Rome?', tools, tool_choice: 'required',
                                                 max_output_tokens: 100, temperature: 0, stream: true });
let argDeltas = '';
let done = null;
for await (const event of streamed) {
  if (event.type === 'response.function_call_arguments.delta') argDeltas += event.delta;
  if (event.type === 'response.function_call_arguments.done') done = event;
}
check(done !== null && argDeltas === done.arguments && argDeltas.length > 0, 'tools: streamed argument deltas');
seen.tools = { call: call ?? null, streamed_arguments: argDeltas,
               after_call: { input_tokens: answered.usage.input_tokens, cached_tokens: answered.usage.input_tokens_details.cached_tokens,
                             first_turn: called.usage.input_tokens + called.usage.output_tokens } };

console.log(JSON.stringify({ model, seen, failures }));
process.exit(failures.length === 0 ? 0 : 1);
