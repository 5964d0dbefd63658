"""Requests that need no tool at all: the "answer directly" class of the tool selector.

Each tool brings its own near misses (``ToolSpec.negative_examples``); these are
the tool-independent rest — conversation, writing, opinions, advice and general
knowledge — so that a message far from every tool is recognised as such rather
than merely scoring low. Nothing here names a tool.
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
