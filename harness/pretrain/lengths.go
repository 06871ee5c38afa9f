package pretrain

import (
	"fmt"

	"github.com/marlowlab/marlow/harness/model"
)

// Lengths are the mean token counts of one teacher role's turns.
type Lengths struct {
	Prompt     float64 // the chat prompt, generation prompt included
	Completion float64 // the completion and its end-of-turn token
	N          int     // transcripts averaged
}

// RoleLengths renders the first n transcripts of the job's teacher and
// returns the mean prompt and completion lengths, in tokens of the job's
// tokenizer, of each teacher role (RoleReviser is eval-opt's revision turn
// of the generator). A tiny base model imitates its teacher, so these are
// what its turns are expected to cost before RL changes them.
func RoleLengths(job Job, n int) (map[string]Lengths, error) {
	teacher, err := job.NewTeacher()
	if err != nil {
		return nil, err
	}
	tok, err := model.NewCharTokenizer(job.Alphabet)
	if err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	sums := map[string]Lengths{}
	for i := range int64(n) {
		tr, err := teacher.Transcript(i)
		if err != nil {
			return nil, err
		}
		p, err := tok.EncodeChat(tr.Prompt, true)
		if err != nil {
			return nil, fmt.Errorf("pretrain: transcript %d: %w", i, err)
		}
		c, err := tok.Encode(tr.Completion)
		if err != nil {
			return nil, fmt.Errorf("pretrain: transcript %d: %w", i, err)
		}
		l := sums[tr.Role]
		l.Prompt += float64(len(p))
		l.Completion += float64(len(c) + 1)
		l.N++
		sums[tr.Role] = l
	}
	for r, l := range sums {
		l.Prompt /= float64(l.N)
		l.Completion /= float64(l.N)
		sums[r] = l
	}
	return sums, nil
}
