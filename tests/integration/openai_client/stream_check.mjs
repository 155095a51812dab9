// Streams a chat completion and a completion from a running conveyor server
// with the official `openai` npm client, and checks that each produced text
// and ended with a finish_reason. Run by tests/integration/openai_node_test.cpp:
//   CONVEYOR_URL=http://127.0.0.1:PORT node stream_check.mjs
// Prints one JSON line with what it saw; exits 1 when a check fails.
import OpenAI from 'openai';

const baseURL = `${process.env.CONVEYOR_URL}/v1`;
const client = new OpenAI({ baseURL, apiKey: process.env.CONVEYOR_API_KEY ?? 'not-needed', maxRetries: 0, timeout: 120_000 });

const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); };

const models = await client.models.list();
const model = process.env.CONVEYOR_MODEL ?? models.data[0]?.id;
check(typeof model === 'string' && model.length > 0, 'GET /v1/models lists a model');

// ignore_eos is a conveyor extension; the client passes unknown fields through.
const chatStream = await client.chat.completions.create({
  model,
  messages: [{ role: 'user', content: 'Tell me a story.' }],
  max_tokens: 12,
  stream: true,
  stream_options: { include_usage: true },
  ignore_eos: true,
});
const chat = { text: '', finish_reason: null, chunks: 0, usage: null };
for await (const chunk of chatStream) {
  chat.chunks += 1;
  const choice = chunk.choices?.[0];
  if (choice) {
    chat.text += choice.delta?.content ?? '';
    chat.finish_reason = choice.finish_reason ?? chat.finish_reason;
  }
  if (chunk.usage) chat.usage = chunk.usage;
}
check(chat.text.length > 0, 'chat: streamed text');
check(['stop', 'length'].includes(chat.finish_reason), `chat: finish_reason (got ${chat.finish_reason})`);
check(chat.usage?.completion_tokens === 12, `chat: usage.completion_tokens is 12 (got ${chat.usage?.completion_tokens})`);

const completionStream = await client.completions.create({
  model,
  prompt: 'Once upon a time',
  max_tokens: 12,
  stream: true,
  ignore_eos: true,
});
const completion = { text: '', finish_reason: null, chunks: 0 };
for await (const chunk of completionStream) {
  completion.chunks += 1;
  const choice = chunk.choices?.[0];
  if (choice) {
    completion.text += choice.text ?? '';
    completion.finish_reason = choice.finish_reason ?? completion.finish_reason;
  }
}
check(completion.text.length > 0, 'completion: streamed text');
check(['stop', 'length'].includes(completion.finish_reason),
      `completion: finish_reason (got ${completion.finish_reason})`);

console.log(JSON.stringify({ model, chat, completion, failures }));
process.exit(failures.length === 0 ? 0 : 1);
