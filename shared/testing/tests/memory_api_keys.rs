//! The in-memory API keys pass the keys' contract, as DynamoDB's do (shared/aws/tests/api_keys.rs).

use chat_testing::InMemoryApiKeys;
use chat_testing::api_keys::api_key_contract::Subject;

async fn fresh() -> Subject {
    Subject::new(InMemoryApiKeys::new())
}

chat_testing::api_key_contract!(fresh());
