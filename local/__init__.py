"""The embedded local stack: the same template, handlers and ASL, with moto and no Docker."""
