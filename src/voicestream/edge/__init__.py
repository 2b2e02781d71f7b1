"""The edge: what runs every persistent connection of both servers, the speech server's and
the agent's (`voicestream.edge.connection`). It knows neither the speech core nor the agent:
each server hands it a small admission protocol (`Host`), and each face plugs in what it
parses and formats. It imports nothing of the engine (the agent's image has no ONNX Runtime).
"""
