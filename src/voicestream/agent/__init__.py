"""The voice agent: an LLM's answer, cut into sentences and spoken as it is written.

Import from the module that holds what you need, so that a command loads only its own
dependencies (Strands and AgentCore take a second or two to import):

- `voicestream.agent.llm`: `create_model` (local | openai | bedrock, through Strands
  Agents), `stream_text`;
- `voicestream.agent.local_llm`: `LocalLlamaModel`, SmolLM2-135M-Instruct in process;
- `voicestream.agent.runtime`: `run`, one answer as the events of PROTOCOL.md section 2
  (`bidi`, `batch`, `batch-stream`);
- `voicestream.agent.conversation`: `ConversationStore`, what is remembered of each
  conversation (keyed by AgentCore's session id, bounded), and `heard_text`, what the
  listener heard of an answer they cut short;
- `voicestream.agent.settings`: `AgentSettings`, from the CLI or the environment;
- `voicestream.agent.service`: `AgentService`, what the app holds and the Realtime sockets
  act on (the LLM, the recognizer, the conversations, the answers under way, the drain);
- `voicestream.agent.app`: the Bedrock AgentCore app, `create_app`, `serve_agent`,
  `running_agent`.

Comparing the modes of a running agent is a measurement: `voicestream.bench.compare`.
"""
