"""The router's gRPC layer: AgentService (Converse, Complete, GetSession, ListTools) and the gateway's Relay stream."""
