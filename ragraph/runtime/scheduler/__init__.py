"""The wavefront scheduler: many requests' sub-stages across both engines at once."""
