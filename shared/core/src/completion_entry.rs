//! PLACEHOLDER (core interface): the entry points of a stateless completion, declared so that the dialect compiles
//! and runs a plain completion; the core engineer's versions (branch `core`) replace this file at merge. Here the
//! completion's model is checked against the allowed ones and the turn runs as a standard turn: instructions,
//! tools, stop sequences and the response format are not applied yet.

use crate::{
    Answer, Caller, ChatError, ChatModel, ChatService, Completion, SessionStore, StreamingTurn,
    TurnInput,
};

impl<M: ChatModel + 'static, St: SessionStore> ChatService<M, St> {
    /// Starts a streamed completion.
    pub async fn complete_stream(
        &self,
        caller: &Caller,
        input: &TurnInput,
        completion: &Completion,
    ) -> Result<StreamingTurn<M::Stream>, ChatError> {
        self.allowed_model(completion)?;
        self.stream(caller, input).await
    }

    /// Answers a completion whole.
    pub async fn complete(
        &self,
        caller: &Caller,
        input: &TurnInput,
        completion: &Completion,
    ) -> Result<Answer, ChatError> {
        self.allowed_model(completion)?;
        self.answer(caller, input).await
    }

    fn allowed_model(&self, completion: &Completion) -> Result<(), ChatError> {
        match &completion.model_id {
            Some(id) if !self.settings.allowed_models.contains(id) => {
                Err(ChatError::ModelNotFound(id.clone()))
            }
            _ => Ok(()),
        }
    }
}
