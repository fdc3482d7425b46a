"""The bench's data: its index (`realbase`, the real passages; `synthetic`, the padding drawn
around them; `index`, both cached), its questions and the traffic that picks them."""
