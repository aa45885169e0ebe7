package tensor

// StepGraphs is implemented by backends that can record a training step
// as a CUDA graph and replay it (the GPU backend; HugeCTR's
// use_cuda_graph). A caller brackets one whole step with BeginGraphStep and
// EndGraphStep and issues the same operations as for an eager step; the
// backend captures the step the first time and replays the graph on later
// steps whose operations equal the captured ones (the same kernels,
// shapes, buffers and scalar arguments, scalars that change every step
// aside). Whatever it cannot replay it runs eagerly, so a step computes the
// same either way.
type StepGraphs interface {
	// BeginGraphStep starts a graph step; an error means the backend
	// cannot record one at all (e.g. a debug mode that synchronises after
	// every operation): run the step eagerly.
	BeginGraphStep() error
	// EndGraphStep runs the step begun: as the graph, or eagerly. failed
	// says the caller's step stopped early with an error: what it issued
	// runs eagerly and nothing is captured.
	EndGraphStep(failed bool) GraphStep
	// DropGraph frees the graph (the next graph step captures again).
	DropGraph()
}

// GraphStep is what EndGraphStep did.
type GraphStep struct {
	// Captured: this step captured the graph (and ran it). Replayed: the
	// step ran as the graph (captured or replayed).
	Captured, Replayed bool
	// Why, when not empty, is why the step ran eagerly and the graph was
	// dropped (a difference from the captured step, a call a graph cannot
	// replay, a capture the driver refused).
	Why string
	// Differs: Why is a difference from the captured step (its calls
	// replayable, their shapes, buffers or scalars changed, e.g. a
	// workspace an evaluation grew): capturing again may serve later steps.
	Differs bool
}
