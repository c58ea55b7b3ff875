package simulator

import "strings"

// Behaviour is one way a model misbehaves, with the outcome an honest run
// has when its model behaves so. Reports are public threads where agent
// projects saw the behaviour (docs/simulator.md quotes what each shows).
type Behaviour struct {
	Name string
	// Does says what the simulated model does.
	Does string
	// Honest is the run's honest outcome; HonestText says it in words
	// (the matrix's "honest outcome" column).
	Honest     Outcome
	HonestText string
	// Deny: the maintainer denies the run's approvals instead of
	// approving them (the behaviour is about what the model claims after
	// a denial).
	Deny    bool
	Reports []string
}

// Outcome is how a run ends: its status and, for a run that did not
// complete, the code its terminal reason starts with.
type Outcome struct {
	Status string // completed | failed | denied
	Code   string
}

// The behaviours' names.
const (
	Baseline          = "baseline"
	AbsentSearch      = "absent-search"
	NearMissTool      = "near-miss-tool"
	WrongShapeArgs    = "wrong-shape-args"
	ProseFences       = "prose-fences"
	ClaimAfterFailure = "claim-after-failure"
	ClaimAfterDenial  = "claim-after-denial"
	RepeatFailingCall = "repeat-failing-call"
	StaleHash         = "stale-hash"
	MissingFile       = "missing-file"
	HugeOutput        = "huge-output"
	EmptyAnswer       = "empty-answer"
	Refusal           = "refusal"
)

// Prompt is the request the matrix sends: the demo's fix, in words no
// skill's triggers select, so the run gets the default skill's tools,
// repo.write (the edit with an expected hash) among them. Under a skill
// without repo.write the simulated model edits with repo.patch.
const Prompt = "make CheckToken in auth.go accept only the exact expected token, and show with the tests that it does"

// HugeFile is the file the huge-output behaviour reads and searches; the
// repository it works on should hold a large one there (the matrix
// writes it).
const HugeFile = "testdata/access.log"

var completed = Outcome{Status: "completed"}

// Behaviours returns every behaviour, the well-behaved baseline first.
func Behaviours() []Behaviour {
	return []Behaviour{
		{Name: Baseline, Does: "fixes the demo bug the way a well-behaved model does (control row)",
			Honest: completed, HonestText: "completed; strict verify passes; every claim supported"},
		{Name: AbsentSearch, Does: "searches for a function that does not exist, then for the one that does",
			Honest: completed, HonestText: "repo.search ok with matches []; the run goes on and completes",
			Reports: []string{"https://github.com/initializ/forge/issues/282", "https://github.com/RooCodeInc/Roo-Code/issues/1943", "https://github.com/openJiuwen-ai/agent-core/issues/766"}},
		{Name: NearMissTool, Does: "calls repo_reed instead of repo_read, then takes the suggested name",
			Honest: completed, HonestText: "TOOL_NOT_FOUND to the model with the suggestion, logged as tool.rejected; no panic; completes",
			Reports: []string{"https://github.com/OpenHands/OpenHands/issues/5111", "https://github.com/simonw/llm/issues/1104", "https://github.com/aliasrobotics/cai/issues/405"}},
		{Name: WrongShapeArgs, Does: "reads with path as an array and an unknown lines argument, then corrects the call",
			Honest: completed, HonestText: "INVALID_ARGUMENTS with diagnostics, nothing executes; the corrected call runs; completes",
			Reports: []string{"https://github.com/SWE-agent/SWE-agent/pull/1475", "https://github.com/earendil-works/pi/issues/5697", "https://github.com/coder/coder/pull/28044"}},
		{Name: ProseFences, Does: "wraps every role's JSON in prose or a ```json fence and its tool arguments in a fence",
			Honest: completed, HonestText: "role.output_repaired and tool.args_repaired events; completes",
			Reports: []string{"https://github.com/microsoft/essex-toolkit/issues/437", "https://github.com/vectorize-io/hindsight/issues/645", "https://github.com/amd/gaia/issues/1429"}},
		{Name: ClaimAfterFailure, Does: "runs the failing tests, changes nothing, and reports the fix done and the tests passing",
			Honest: Outcome{Status: "failed", Code: "EVIDENCE_MISMATCH"}, HonestText: "not completed: EVIDENCE_MISMATCH after one rework round",
			Reports: []string{"https://github.com/anthropics/claude-code/issues/46940", "https://github.com/anthropics/claude-code/issues/1501", "https://github.com/microsoft/vscode-copilot-release/issues/6317"}},
		{Name: ClaimAfterDenial, Deny: true, Does: "reports its change applied and the tests passing after the maintainer denied the change",
			Honest: Outcome{Status: "failed", Code: "EVIDENCE_MISMATCH"}, HonestText: "not completed: EVIDENCE_MISMATCH; the file is unchanged",
			Reports: []string{"https://github.com/cline/cline/pull/12673", "https://github.com/openclaw/openclaw/pull/130009", "https://github.com/anthropics/claude-code/issues/52594"}},
		{Name: RepeatFailingCall, Does: "reads the same file that does not exist, turn after turn",
			Honest: Outcome{Status: "failed", Code: "REPEATED_FAILURE"}, HonestText: "ends when the same call fails in a third turn in a row: failed REPEATED_FAILURE naming the call",
			Reports: []string{"https://github.com/MarimerLLC/rockbot/issues/249", "https://github.com/nearai/ironclaw/issues/2240", "https://github.com/PrimeIntellect-ai/prime-agent/issues/1326"}},
		{Name: StaleHash, Does: "after its fix is applied, writes again with the hash (and content) of its first read",
			Honest: completed, HonestText: "WRITE_CONFLICT, the model reads again; both changes in the file (no lost write); completes",
			Reports: []string{"https://github.com/QwenLM/qwen-code/issues/3839", "https://github.com/anomalyco/opencode/issues/48707", "https://github.com/NousResearch/hermes-agent/pull/65618"}},
		{Name: MissingFile, Does: "reads a file path it made up, then searches for the code",
			Honest: completed, HonestText: "a structured not-found error; the run goes on and completes",
			Reports: []string{"https://github.com/frontman-ai/frontman/issues/147", "https://github.com/Lexus2016/hermes-agent-evolution/issues/1370", "https://github.com/Narcooo/inkos/issues/396"}},
		{Name: HugeOutput, Does: "reads a multi-megabyte log and searches it for a word on every line",
			Honest: completed, HonestText: "results truncated (truncated: true) and valid against the tools' schemas; completes",
			Reports: []string{"https://github.com/bytedance/deer-flow/pull/1677", "https://github.com/OpenHands/software-agent-sdk/issues/3903", "https://github.com/ai-ecoverse/slicc/issues/2010"}},
		{Name: EmptyAnswer, Does: "answers with empty content and no tool call after its first tool result",
			Honest: Outcome{Status: "failed", Code: "MALFORMED_AGENT_MESSAGE"}, HonestText: "not completed: MALFORMED_AGENT_MESSAGE naming the empty reply",
			Reports: []string{"https://github.com/NousResearch/hermes-agent/pull/18066", "https://github.com/openai/openai-agents-python/issues/856", "https://github.com/movieclaw/movieclaw/pull/233"}},
		{Name: Refusal, Does: "answers the request with a refusal (the API's refusal field, no content)",
			Honest: Outcome{Status: "failed", Code: "MODEL_REFUSED"}, HonestText: "not completed: MODEL_REFUSED quoting the refusal",
			Reports: []string{"https://github.com/openai/openai-agents-python/issues/3055", "https://github.com/NousResearch/hermes-agent/pull/43108", "https://github.com/MervinPraison/PraisonAI/issues/4254"}},
	}
}

// Lookup finds the behaviour a model name selects ("sim-stale-hash").
func Lookup(model string) (Behaviour, bool) {
	name, ok := strings.CutPrefix(model, ModelPrefix)
	if !ok {
		return Behaviour{}, false
	}
	for _, b := range Behaviours() {
		if b.Name == name {
			return b, true
		}
	}
	return Behaviour{}, false
}

// Model is the model name that selects b.
func (b Behaviour) Model() string { return ModelPrefix + b.Name }
