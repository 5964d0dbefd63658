"""Requests that need no tool at all: the "answer directly" class of the tool selector.

Each tool brings its own near misses (``ToolSpec.negative_examples``); these are
the tool-independent rest — conversation, writing, opinions, advice and general
knowledge — so that a message far from every tool is recognised as such rather
than merely scoring low. Nothing here names a tool.

``CAPABILITY_ASKS`` are the other half of "no tool": asks for things an agent's
tools commonly do (send mail, book a trip, look up a price, open a ticket).
With no such tool loaded they need no tool — the agent says it cannot — and
without them the nearest loaded tool took them ("How much is NVDA trading
at?" ran an arithmetic tool on numbers nobody said). They are judged against
the tool list like every no-tool example (``candidates.CardIndex``): one a
loaded tool covers leaves the no-tool class, so loading a mail tool makes
"Email Sam the report" its ask again.
"""

from __future__ import annotations

NO_TOOL_EXAMPLES: tuple[str, ...] = (
    "Hello!",
    "Hi there, how are you doing today?",
    "Thanks, that was helpful.",
    "Good morning!",
    "Who are you?",
    "Tell me a joke.",
    "Write a short poem about the ocean.",
    "Write a haiku about autumn leaves.",
    "Tell me a bedtime story about a brave mouse.",
    "Give me three ideas for a birthday party.",
    "Summarize the plot of Romeo and Juliet.",
    "What is the capital of Spain?",
    "Who wrote Pride and Prejudice?",
    "Why is the sky blue?",
    "What is photosynthesis?",
    "Explain how a rainbow forms.",
    "What is machine learning?",
    "How do vaccines work?",
    "What is the largest planet in our solar system?",
    "Who painted the Mona Lisa?",
    "Give me some tips for sleeping better.",
    "How can I improve my writing?",
    "What should I cook for dinner tonight?",
    "Translate 'good night' into French.",
    "What is your favourite colour?",
    "Do you think cats or dogs make better pets?",
    "Can you help me write an email to my landlord?",
    "What does the word 'ephemeral' mean?",
    "List some healthy breakfast foods.",
    "Describe the water cycle in simple terms.",
    "What is the population of Tokyo?",
    "Which country is Osaka in?",
    "What language do they speak in Brazil?",
    "How tall is Mount Everest?",
    "How many bones are in the human body?",
    "How far is the Sun from the Earth?",
    "When did the Berlin Wall fall?",
)

CAPABILITY_ASKS: tuple[str, ...] = (
    "Send an email to my landlord about the broken heater.",
    "Reply to the last message from my manager.",
    "Text my brother that I'm running late.",
    "Post a message in the team chat channel.",
    "Schedule a meeting with Priya next Tuesday afternoon.",
    "What's on my calendar tomorrow?",
    "Cancel my dentist appointment.",
    "Remind me to water the plants in two hours.",
    "Add milk and eggs to my shopping list.",
    "Book a table for four at an Italian restaurant tonight.",
    "Order a large pepperoni pizza for delivery.",
    "Get me a taxi to the airport.",
    "Book a flight to Madrid for next Friday.",
    "Find a hotel near the conference centre for three nights.",
    "Is my train on time?",
    "Track my package.",
    "Buy the cheapest wireless earbuds with good reviews.",
    "What's the stock price of Microsoft right now?",
    "How are the markets doing today?",
    "Transfer 50 dollars to my savings account.",
    "Pay my electricity bill.",
    "What's my account balance?",
    "Will it rain this weekend?",
    "What's the weather like outside right now?",
    "Open a support ticket about the billing error.",
    "Assign the login bug to Maria.",
    "Deploy the latest build to staging.",
    "Restart the payments service.",
    "Show me the error logs from the last hour.",
    "Who is on call this week?",
    "Create a pull request for my branch.",
    "Find the design doc I edited yesterday.",
    "Share the budget spreadsheet with the finance team.",
    "Turn off the living room lights.",
    "Set the thermostat to 21 degrees.",
    "Play some relaxing jazz.",
    "Call my mom.",
    "Look up Dana's phone number in my contacts.",
    "Translate this paragraph into Japanese and send it to the client.",
    "Give me directions to the nearest pharmacy.",
)
