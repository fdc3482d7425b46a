"""The executable program, between the compiler (passes/) and the runtime (runtime/): what
`passes.lower` makes of a compiled graph (`program`: units, chains, regions), how a request walks
it (`walk`), what each unit does (`interpret`) and the compiled workflow that carries it all
(`compiled`). The passes import this layer and so does the runtime; it imports only `ir`, as
torch.fx keeps its `Interpreter` and `GraphModule` beside its passes."""
