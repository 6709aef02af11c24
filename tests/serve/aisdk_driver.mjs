// Drives tether serve's AI SDK endpoint with the official `ai` package (its DefaultChatTransport,
// readUIMessageStream and AbstractChat, the core of React's useChat). Reads one operation as JSON
// on stdin, prints its result as JSON on stdout. AI_SDK_DIR: where `npm install ai@<major>` put it.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const require = createRequire(join(process.env.AI_SDK_DIR, 'package.json'));
const ai = await import(pathToFileURL(require.resolve('ai')).href);
const { AbstractChat, DefaultChatTransport, readUIMessageStream } = ai;
const aiVersion = require('ai/package.json').version;

const input = JSON.parse(await new Promise(resolve => {
  let text = '';
  process.stdin.on('data', c => { text += c; });
  process.stdin.on('end', () => resolve(text));
}));

const api = `${input.url}/v1/aisdk/chat`;
const headers = input.token ? { Authorization: `Bearer ${input.token}` } : {};

// a fetch whose response body is cut (as a network drop does) after `count` chunks of `type`
function droppingFetch(drop) {
  return async (url, init) => {
    const response = await fetch(url, init);
    if (!drop || init.method !== 'POST' || !response.body) return response;
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let seen = 0;
    const body = new ReadableStream({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) { controller.close(); return; }
        seen += decoder.decode(value).split(`"type":"${drop.type}"`).length - 1;
        controller.enqueue(value);
        if (seen >= drop.count) {
          await reader.cancel();
          controller.error(new TypeError('network error: the connection dropped'));
        }
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  };
}

// assemble a chunk stream into the final UI message, keeping every chunk
async function assemble(stream, message) {
  const chunks = [];
  const errors = [];
  const tapped = stream.pipeThrough(new TransformStream({
    transform(chunk, controller) { chunks.push(chunk); controller.enqueue(chunk); },
  }));
  let last;
  try {
    for await (const m of readUIMessageStream({ stream: tapped, message, onError: e => errors.push(String(e.message ?? e)) })) {
      last = m;
    }
  } catch (e) {
    errors.push(String(e.message ?? e));
  }
  return { chunks, message: last ?? null, errors };
}

function failure(e) {
  return { failed: true, error: String(e.message ?? e), statusCode: e.statusCode ?? null, body: e.responseBody ?? null };
}

class State {
  constructor(messages) { this.status = 'ready'; this.error = undefined; this.messages = messages; }
  pushMessage(m) { this.messages = [...this.messages, m]; }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(i, m) { this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)]; }
  snapshot(x) { return structuredClone(x); }
}

function newChat(extra = {}) {
  const finished = [];
  const errors = [];
  const state = new State(input.messages ?? []);
  const chat = new AbstractChat({
    id: input.chatId,
    state,
    transport: new DefaultChatTransport({ api, headers, fetch: droppingFetch(input.drop) }),
    onFinish: f => finished.push({ isError: f.isError, isAbort: f.isAbort, isDisconnect: f.isDisconnect, finishReason: f.finishReason ?? null }),
    onError: e => errors.push(String(e.message ?? e)),
    ...extra,
  });
  return { chat, state, finished, errors };
}

async function until(test, what) {
  const deadline = Date.now() + 20000;
  while (!test()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise(r => setTimeout(r, 20));
  }
}

async function run() {
  const transport = new DefaultChatTransport({ api, headers });
  switch (input.op) {
    case 'send': {
      try {
        const stream = await transport.sendMessages({
          trigger: input.trigger ?? 'submit-message',
          chatId: input.chatId,
          messageId: input.messageId,
          messages: input.messages,
          abortSignal: undefined,
        });
        return await assemble(stream, input.lastMessage);
      } catch (e) {
        return failure(e);
      }
    }
    case 'reconnect': {
      try {
        const stream = await transport.reconnectToStream({ chatId: input.chatId });
        if (stream === null) return { none: true };
        return await assemble(stream);
      } catch (e) {
        return failure(e);
      }
    }
    case 'chat': {
      // useChat's flow: send the text; answer approval requests; the chat sends the answers itself
      const { lastAssistantMessageIsCompleteWithApprovalResponses, lastAssistantMessageIsCompleteWithToolCalls } = ai;
      const { chat, state, finished, errors } = newChat({
        sendAutomaticallyWhen: options =>
          lastAssistantMessageIsCompleteWithApprovalResponses(options) ||
          lastAssistantMessageIsCompleteWithToolCalls(options),
      });
      await chat.sendMessage({ text: input.text });
      const asked = [];
      for (const answer of input.approvals ?? []) {
        const last = state.messages[state.messages.length - 1];
        const pending = last.parts.filter(p => p.state === 'approval-requested');
        asked.push(pending.map(p => ({ type: p.type, toolCallId: p.toolCallId, approvalId: p.approval.id })));
        const before = finished.length;
        for (const p of pending) {
          await chat.addToolApprovalResponse({ id: p.approval.id, approved: answer.approved, reason: answer.reason });
        }
        await until(() => finished.length > before && chat.status !== 'submitted' && chat.status !== 'streaming', 'the answer to be sent');
      }
      for (const answer of input.outputs ?? []) {
        // the page runs the tool itself (a tool without execute) and adds its output
        const last = state.messages[state.messages.length - 1];
        const pending = last.parts.filter(p => p.type.startsWith('tool-') && p.state === 'input-available');
        asked.push(pending.map(p => ({ type: p.type, toolCallId: p.toolCallId, input: p.input })));
        const before = finished.length;
        for (const p of pending) {
          await chat.addToolOutput({ tool: p.type.slice(5), toolCallId: p.toolCallId, output: answer.output });
        }
        await until(() => finished.length > before && chat.status !== 'submitted' && chat.status !== 'streaming', 'the output to be sent');
      }
      return { messages: state.messages, status: chat.status, finished, errors, asked };
    }
    case 'drop-and-resume': {
      // the connection drops mid-answer; the page (resume: true) reconnects to the turn
      const { chat, state, finished, errors } = newChat();
      await chat.sendMessage({ text: input.text });
      const partial = structuredClone(state.messages);
      const statusAfterDrop = chat.status;
      await chat.resumeStream();
      return { partial, statusAfterDrop, messages: state.messages, status: chat.status, finished, errors };
    }
    default:
      throw new Error(`unknown op ${input.op}`);
  }
}

const result = await run();
process.stdout.write(JSON.stringify({ aiVersion, ...result }));
