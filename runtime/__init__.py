"""The reference Runtime: connects to a deployment's WebSocket API, says hello with a complete
capability declaration per Harness, runs Turns with the scripted harness and reports observations."""
