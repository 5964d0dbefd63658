"""One agent turn: load the session, plan, run the tool rounds, stream the answer, record what happened."""
