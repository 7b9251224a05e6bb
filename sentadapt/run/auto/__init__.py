"""`--recipe auto`: the candidates, their launch on a base evaluated once, and the choice among them."""
