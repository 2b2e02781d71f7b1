"""Phone calls: each carrier's media stream a face on the agent's edge (`call`), over the
same conversation as the Realtime API; one protocol machine per carrier (`twilio`, `telnyx`,
`plivo`, `vonage`), their signatures (`signatures`) and routes (`routes`)."""
